"""POST /runs/{id}/fixes, GET /runs/{id}/fixes/{fixId} and GET /datasets/{id}/versions over moto: the route checks
and records a fix job (202), the fix worker (invoked asynchronously; route_lambdas runs it in-process) writes the
version under versions/<owner>/<dataset>/ with its lineage and starts a run on it; failures are recorded with their
reason; another owner's ids 404."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from awsenv import BUCKET, admit_queued, as_function, route_lambdas

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
        status, job = call("POST", f"/runs/{run_id}/fixes", body={**body, "confirm": ["drop", "clear"]})
    # Then the route answers 202 with the job to poll, and the worker was invoked asynchronously with its id only
    assert status == 202, job
    assert job["statusUrl"] == f"/runs/{run_id}/fixes/{job['fixId']}" and job["request"]["quick"] is True
    assert [event for name, event in calls if name == "fix_worker"] == [
        {"owner": "alice", "runId": run_id, "fixId": job["fixId"]}
    ]
    assert not calls.failures, calls.failures
    # (each function with only the DynamoDB actions its role holds)
    for name in ("fix", "fix_worker"):
        used = calls.table_actions()[name]
        assert used and used <= TABLE_ACCESS[name], (name, sorted(used - TABLE_ACCESS[name]))
    status, fixed = call("GET", job["statusUrl"])
    assert status == 200 and fixed["status"] == "SUCCEEDED" and fixed["completedAt"], fixed
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
    # And a run was queued on the version's exact object, and admission started it
    assert run["status"] == "QUEUED" and version["runId"] == run["runId"] and run["trigger"] == "api"
    assert admit_queued() == [run["runId"]]
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
    # bob cannot fix alice's run, see her fix jobs, nor list her versions
    assert call("POST", f"/runs/{run_id}/fixes", owner="bob", body={"quick": True})[0] == 404
    assert call("GET", f"/runs/{run_id}/fixes/fnope")[0] == 404
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


def _job(call: Any, run_id: str, body: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    with route_lambdas(size_check=False) as calls:
        status, job = call("POST", f"/runs/{run_id}/fixes", body=body)
    assert status == 202, job
    status, found = call("GET", job["statusUrl"])
    assert status == 200
    return found, calls


def test_a_fix_the_data_refuses_or_an_internal_error_ends_failed_with_its_reason(
    call: Any, world: dict[str, Any], analysed: Path
) -> None:
    # Given alice's finished run, whose analysis no longer matches its input object (the route cannot tell)
    dataset_id, run_id, _ = _finished_run(call, world, analysed)
    prefix = f"artifacts/alice/{dataset_id}/{run_id}/"
    analysis = json.loads(_object(world, prefix + "analysis.json"))
    analysis["run"]["contentHash"] = "0" * 64
    world["s3"].put_object(Bucket=BUCKET, Key=prefix + "analysis.json", Body=json.dumps(analysis).encode())
    # When she asks for the quick fixes: the job fails on the request's data, with what to do, and no version
    body = {"quick": True, "confirm": ["drop", "clear"]}
    failed, calls = _job(call, run_id, body)
    assert failed["status"] == "FAILED" and failed["error"] == "FixError", failed
    assert "start a new run first" in failed["reason"] and failed["version"] is None
    assert not calls.failures  # the user's failure: the invocation itself succeeded (no alarm, no DLQ)
    # When the run's flags are gone (a system fault): the job fails saying so, and the invocation fails too
    world["s3"].put_object(
        Bucket=BUCKET, Key=prefix + "analysis.json", Body=(analysed / "analysis.json").read_bytes()
    )
    world["s3"].delete_object(Bucket=BUCKET, Key=prefix + "flags.csv")
    failed, calls = _job(call, run_id, body)
    assert failed["status"] == "FAILED" and failed["error"] == "ClientError", failed
    assert "internal error" in failed["reason"] and [name for name, _ in calls.failures] == ["fix_worker"]
    assert "Contents" not in world["s3"].list_objects_v2(Bucket=BUCKET, Prefix="versions/")


def test_a_job_its_worker_lost_is_reported_failed_and_a_duplicate_delivery_changes_nothing(
    call: Any, world: dict[str, Any], analysed: Path
) -> None:
    from iterate.api.fix_routes import RUNNING_STALE_S

    # Given a job the worker took long ago and never ended (timed out, out of memory)
    dataset_id, run_id, _ = _finished_run(call, world, analysed)
    repo = DynamoRunRepository(world["table"], "alice")
    repo.create_fix(run_id, {"fixId": "flost", "datasetId": dataset_id, "createdAt": "2026-11-25T00:00:00Z",
                             "request": {"quick": True}})  # fmt: skip
    repo.transition_fix(
        run_id, "flost", from_status="PENDING", to_status="RUNNING", startedAt="2026-11-25T00:00:00Z"
    )
    # When she polls it: it is FAILED, saying what happened
    status, lost = call("GET", f"/runs/{run_id}/fixes/flost")
    assert status == 200 and lost["status"] == "FAILED" and lost["error"] == "FixWorkerLost", lost
    assert "timed out" in lost["reason"] and RUNNING_STALE_S < 3600
    # And a late (duplicate) delivery of its event leaves it as it is
    from awsenv import FakeContext, load_handler

    out = load_handler("fix_worker").lambda_handler(
        {"owner": "alice", "runId": run_id, "fixId": "flost"}, FakeContext("iterate-fix_worker")
    )
    assert out == {"fixId": "flost", "status": "FAILED"}
    assert call("GET", f"/runs/{run_id}/fixes/flost")[1]["reason"] == lost["reason"]
