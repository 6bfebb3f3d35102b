"""POST /runs/{id}/fixes and GET /datasets/{id}/versions over moto: a finished run's input fixed into a new version
under versions/<owner>/<dataset>/, recorded with its lineage, a run started on it, another owner's ids 404."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from awsenv import BUCKET, as_function, route_lambdas

from iterate.pipeline import run_local
from iterate.settings import Settings
from iterate.storage.dynamo import DynamoRunRepository

pytestmark = [pytest.mark.handler, pytest.mark.filterwarnings("ignore:No application metrics")]

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "orders.csv"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from infra.runtime import TABLE_ACCESS  # noqa: E402


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample analysed by the real engine (what the report step leaves under the run's artifacts)."""
    out = tmp_path_factory.mktemp("fix-route") / "run"
    run_local(SAMPLE, out, settings=Settings())
    return out


def _finished_run(
    call: Any, world: dict[str, Any], analysed: Path, owner: str = "alice"
) -> tuple[str, str, str]:
    """A dataset whose upload is the sample, and a SUCCEEDED run of it with its analysis.json and flags.csv."""
    status, body = call("POST", "/datasets", owner=owner, body={"name": "Orders", "fileName": "orders.csv"})
    assert status == 201, body
    dataset_id, key = body["dataset"]["datasetId"], body["upload"]["key"]
    version = world["s3"].put_object(Bucket=BUCKET, Key=key, Body=SAMPLE.read_bytes())["VersionId"]
    repo = DynamoRunRepository(world["table"], owner)
    source = {"bucket": BUCKET, "key": key, "versionId": version}
    repo.record_upload(dataset_id, source)
    run_id = "r" + "0" * 23 + owner[0]
    prefix = f"artifacts/{owner}/{dataset_id}/{run_id}/"
    for name in ("analysis.json", "flags.csv"):
        world["s3"].put_object(Bucket=BUCKET, Key=prefix + name, Body=(analysed / name).read_bytes())
    repo.create_run(
        {
            "runId": run_id,
            "datasetId": dataset_id,
            "status": "RUNNING",
            "trigger": "s3",
            "startedAt": "2026-11-25T00:00:00Z",
            "source": source,
            "artifactsPrefix": prefix,
        }
    )
    repo.transition(run_id, from_status="RUNNING", to_status="SUCCEEDED")
    return dataset_id, run_id, key


def _object(world: dict[str, Any], key: str) -> bytes:
    return bytes(world["s3"].get_object(Bucket=BUCKET, Key=key)["Body"].read())


def test_fixes_write_a_version_record_its_lineage_and_start_a_run_on_it(
    call: Any, world: dict[str, Any], analysed: Path
) -> None:
    # Given alice's finished run of the sample
    dataset_id, run_id, upload_key = _finished_run(call, world, analysed)
    before = hashlib.sha256(_object(world, upload_key)).hexdigest()
    # When she asks for the quick fixes and one smart fix answered in the request, without confirming
    body = {"issues": ["typos-city"], "answers": {"typos-city": "standardize"}, "quick": True}
    status, refused = call("POST", f"/runs/{run_id}/fixes", body=body)
    # Then the destructive ones are named and nothing is written
    assert status == 409 and "send confirm" in refused["message"] and "duplicates-exact" in refused["message"]
    assert "Contents" not in world["s3"].list_objects_v2(Bucket=BUCKET, Prefix="versions/")
    # When she confirms them
    with route_lambdas(size_check=False) as calls, as_function("fix"):
        status, fixed = call("POST", f"/runs/{run_id}/fixes", body={**body, "confirm": ["drop", "clear"]})
    assert status == 201, fixed
    # (with only the DynamoDB actions the fix function's role holds)
    used = calls.table_actions()["fix"]
    assert used and used <= TABLE_ACCESS["fix"], sorted(used - TABLE_ACCESS["fix"])
    version, run = fixed["version"], fixed["run"]
    # Then the version is under her prefix, with its changes and version.json, and the upload is untouched
    assert version["key"] == f"versions/alice/{dataset_id}/{version['versionId']}/orders.csv"
    new_bytes = _object(world, version["key"])
    assert hashlib.sha256(new_bytes).hexdigest() == version["sha256"]
    assert hashlib.sha256(_object(world, upload_key)).hexdigest() == before == version["parentSha256"]
    meta = json.loads(_object(world, version["key"].rsplit("/", 1)[0] + "/version.json"))
    assert meta["answers"] == {"typos-city": ["standardize"]} and meta["parent"]["runId"] == run_id
    changes = list(csv.DictReader(io.StringIO(_object(world, version["changesKey"]).decode())))
    cities = [c for c in changes if c["issue_id"] == "typos-city"]
    assert len(cities) == 8 and {c["new"] for c in cities} <= {
        "Cambridge",
        "Chicago",
        "Seattle",
        "San Francisco",
    }
    assert version["parentRunId"] == run_id and "typos-city" in version["issuesApplied"]
    assert version["counts"]["duplicates-exact"] == {"drop_rows": 3}
    # And a run was started on the version's exact object
    assert run["status"] == "QUEUED" and version["runId"] == run["runId"]
    execution = world["sfn"].describe_execution(
        executionArn=f"{world['machine'].replace(':stateMachine:', ':execution:')}:{run['runId']}"
    )
    sent = json.loads(execution["input"])
    assert sent["source"]["key"] == version["key"] and sent["source"]["versionId"]
    assert sent["owner"] == "alice" and sent["datasetId"] == dataset_id
    # And the dataset lists its version, a page at a time
    status, listed = call("GET", f"/datasets/{dataset_id}/versions", query={"limit": "1"})
    assert status == 200 and [v["versionId"] for v in listed["versions"]] == [version["versionId"]]
    assert listed["versions"][0]["runId"] == run["runId"]


def test_another_owner_gets_404_and_a_smart_fix_needs_its_answer(
    call: Any, world: dict[str, Any], analysed: Path
) -> None:
    dataset_id, run_id, _ = _finished_run(call, world, analysed)
    # bob cannot fix alice's run nor list her versions
    assert call("POST", f"/runs/{run_id}/fixes", owner="bob", body={"quick": True})[0] == 404
    assert call("GET", f"/datasets/{dataset_id}/versions", owner="bob")[0] == 404
    # A smart fix named without an answer says how to answer it
    status, body = call("POST", f"/runs/{run_id}/fixes", body={"issues": ["typos-city"]})
    assert status == 409 and f"/issues/{run_id}.typos-city/followup" in body["message"]
    # An answer that is not an option is refused with the options
    status, body = call(
        "POST", f"/runs/{run_id}/fixes", body={"issues": ["typos-city"], "answers": {"typos-city": "burn"}}
    )
    assert status == 409 and "standardize" in body["message"]
    # A body with an unknown field is a 422
    assert call("POST", f"/runs/{run_id}/fixes", body={"quick": True, "force": True})[0] == 422
