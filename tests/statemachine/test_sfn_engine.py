"""The engine path on AWS: the real ASL runs a large upload through the Parquet copy and Athena (moto; the
queries on DuckDB through tests/handlers/athenafake.py), with the same results as the engine path locally."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from athenafake import athena_sync, executions
from awsenv import (
    BUCKET,
    ENGINE_DATABASE,
    REGION,
    REPO,
    history,
    load_handler,
    object_created_event,
    reset_caches,
    route_lambdas,
    run_execution,
)

from iterate.storage.dynamo import DynamoRunRepository

pytestmark = [pytest.mark.statemachine, pytest.mark.filterwarnings("ignore:No application metrics")]

CHUNK_BYTES = 48 * 1024
SAMPLE_ROWS = 1_000


@pytest.fixture(scope="module")
def bench_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Given the bench generator's file, 3,000 rows (~330 KB: seven ranges of 48 KB)."""
    sys.path.insert(0, str(REPO / "scripts"))
    from gen_bench import write

    path = tmp_path_factory.mktemp("bench") / "orders.csv"
    write(path, n_rows=3_000, seed=11)
    return path


def _engine_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITERATE_CHUNK_BYTES", str(CHUNK_BYTES))
    monkeypatch.setenv("ITERATE_ENGINE", "always")
    monkeypatch.setenv("ITERATE_ENGINE_SAMPLE_ROWS", str(SAMPLE_ROWS))
    reset_caches()


def _run(
    machine: dict[str, Any], body: bytes, dataset: str, *, cutoff_bytes: int | None = None
) -> tuple[dict[str, Any], Any, Any]:
    key = f"uploads/alice/{dataset}/orders.csv"
    version = machine["s3"].put_object(Bucket=BUCKET, Key=key, Body=body, ChecksumAlgorithm="SHA256")[
        "VersionId"
    ]
    with (
        athena_sync(cutoff_bytes=cutoff_bytes) as athena,
        route_lambdas({"sandbox": load_handler("sandbox").lambda_handler}) as calls,
    ):
        done = run_execution(
            machine["sfn"], machine["arn"], object_created_event(BUCKET, key, version), timeout_s=120
        )
    return done, calls, athena


def _flags(text: str) -> list[tuple[str, ...]]:
    return sorted(tuple(r) for r in csv.reader(io.StringIO(text)))


def test_a_large_upload_runs_on_athena_with_the_local_engine_paths_results(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, bench_csv: Path
) -> None:
    # Given an upload routed to the engine path (ITERATE_ENGINE=always; 48 KB ranges)
    _engine_env(monkeypatch)
    # When the state machine runs it
    done, calls, athena = _run(machine, bench_csv.read_bytes(), "engine")
    # Then it SUCCEEDED through the chunk Map, EngineStep rounds and Athena queries, never MergeChunks
    assert done["status"] == "SUCCEEDED", done
    assert not calls.failures
    entered = [
        (e.get("stateEnteredEventDetails") or {}).get("name")
        for e in history(machine["sfn"], done["executionArn"])
    ]
    assert "ProfileChunks" in entered and "MergeChunks" not in entered
    rounds = entered.count("RunEngineQuery")
    assert rounds >= 6 and entered.count("EngineStep") == rounds + 1
    # And every statement was an execution of moto's Athena, in the deployment's workgroup and database
    ran = executions()
    assert len(ran) == rounds == len(athena.queries)
    assert {e.context["Database"] for e in ran} == {ENGINE_DATABASE}
    assert all(q["sql"].startswith("UNLOAD (WITH") for q in athena.queries)
    assert athena.bytes_scanned > 0
    # And the run's Glue tables were dropped at the end (the parts stay until the lifecycle rule expires them)
    glue = boto3.client("glue", region_name=REGION)
    assert glue.get_tables(DatabaseName=ENGINE_DATABASE)["TableList"] == []
    # And the profile and flags are those of the engine path run locally on the same file and sample
    output = json.loads(done["output"])
    prefix = output["run"]["prefix"]
    profile = json.loads(machine["s3"].get_object(Bucket=BUCKET, Key=prefix + "profile.json")["Body"].read())
    flags = machine["s3"].get_object(Bucket=BUCKET, Key=prefix + "flags.csv")["Body"].read().decode()
    from iterate.engine.step import run_engine
    from iterate.report import write_flags_csv
    from iterate.settings import Settings

    local = run_engine(bench_csv, Settings(engine_sample_rows=SAMPLE_ROWS), name="orders")
    local_flags = bench_csv.parent / "local_flags.csv"
    write_flags_csv(local.flags, local_flags, columns=[c.name for c in local.profile.columns])
    assert profile["rowCount"] == local.counts.rowCount == 3_000
    assert len(_flags(flags)) > 100
    assert _flags(flags) == _flags(local_flags.read_text())
    assert [c["distinct"] for c in profile["columns"]] == [c.distinct for c in local.profile.columns]
    assert profile["duplicates"]["exactRows"] == local.profile.duplicates.exactRows
    # And the content identity is S3's own checksum of the object, not a hash the function streamed
    assert profile["contentHash"].startswith("s3-sha256-")
    # And every EngineStep round is booked in the run's infrastructure estimate (the profile step's share)
    record = DynamoRunRepository(machine["table"], "alice").get_run(output["run"]["runId"])
    assert record is not None and record["status"] == "SUCCEEDED"
    assert int(record["stepInfra"]["profile"]["lambdaInvocations"]) == rounds + 1


def test_a_range_the_engine_cannot_read_alone_fails_the_run_naming_it(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, bench_csv: Path
) -> None:
    # Given the bench file with a quoted value holding a line break in the middle
    lines = bench_csv.read_bytes().split(b"\n")
    fields = lines[len(lines) // 2].split(b",")
    fields[1] = b'"first line\nsecond line"'
    lines[len(lines) // 2] = b",".join(fields)
    _engine_env(monkeypatch)
    # When it runs on the engine path
    done, _, athena = _run(machine, b"\n".join(lines), "quoted")
    # Then the run FAILED before any query, its record naming the range and what to do
    assert done["status"] == "FAILED"
    assert not athena.queries
    run_id = json.loads(done["input"])  # the S3 event; the record is found by its dataset
    del run_id
    runs = machine["table"].scan()["Items"]
    failed = [
        r for r in runs if r.get("status") == "FAILED" and "has no Parquet part" in str(r.get("reason"))
    ]
    assert failed, [r.get("reason") for r in runs if r.get("status") == "FAILED"]
    assert "EngineInputError" in str(failed[0]["error"])


def test_a_statement_athena_cancels_at_the_scan_limit_fails_the_run_with_athenas_reason(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, bench_csv: Path
) -> None:
    # Given a workgroup whose per-statement scan limit is smaller than the Parquet copy
    _engine_env(monkeypatch)
    # When the run reaches a statement that reads every column
    done, _, athena = _run(machine, bench_csv.read_bytes(), "cutoff", cutoff_bytes=50_000)
    # Then the run FAILED at that statement, its record naming Athena's reason
    assert done["status"] == "FAILED"
    assert athena.queries and athena.queries[-1]["bytes"] > 50_000
    failed = [r for r in machine["table"].scan()["Items"] if r.get("status") == "FAILED"]
    assert len(failed) == 1 and failed[0]["error"] == "States.TaskFailed"
    assert "Bytes scanned limit was exceeded" in str(failed[0]["reason"])


def test_a_file_in_the_owners_bucket_is_read_through_their_role_by_every_step_that_reads_it(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, bench_csv: Path
) -> None:
    # Given the bench file in the owner's own bucket, and a run asked for on it with their role
    _engine_env(monkeypatch)
    machine["s3"].create_bucket(Bucket="customer-data")
    machine["s3"].put_object(
        Bucket="customer-data",
        Key="exports/orders.csv",
        Body=bench_csv.read_bytes(),
        ChecksumAlgorithm="SHA256",
    )
    role = "arn:aws:iam::123456789012:role/iterate-reader"
    request = {
        "trigger": "api",
        "owner": "alice",
        "datasetId": "theirs",
        "runId": "r-theirs",
        "source": {"bucket": "customer-data", "key": "exports/orders.csv", "roleArn": role},
    }
    # When the state machine runs it on the engine path
    with athena_sync(), route_lambdas({"sandbox": load_handler("sandbox").lambda_handler}) as calls:
        done = run_execution(machine["sfn"], machine["arn"], request, timeout_s=120)
    # Then it SUCCEEDED, and the steps that read the file assumed the owner's role to do it
    assert done["status"] == "SUCCEEDED", calls.failures
    assumed = {
        function for function, service, op, _ in calls.aws_calls if (service, op) == ("sts", "AssumeRole")
    }
    assert {"profile", "chunk"} <= assumed
    # And everything the run wrote is in Iterate's bucket; the owner's bucket holds only their file
    listed = machine["s3"].list_objects_v2(Bucket="customer-data")["Contents"]
    assert [o["Key"] for o in listed] == ["exports/orders.csv"]
    prefix = json.loads(done["output"])["run"]["prefix"]
    assert machine["s3"].head_object(Bucket=BUCKET, Key=prefix + "flags.csv")["ContentLength"] > 0


def test_a_run_on_the_engine_path_can_be_fixed_its_input_known_by_s3s_checksum(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from awsenv import admit_queued
    from test_sfn_ways_in import _api, _wait_for_end

    # Given the sample orders analysed on the engine path (32 KiB ranges), its identity S3's checksum
    sample = (REPO / "samples" / "orders.csv").read_bytes()
    monkeypatch.setenv("ITERATE_STATE_MACHINE_ARN", machine["arn"])
    monkeypatch.setenv("ITERATE_CHUNK_BYTES", str(32 * 1024))
    monkeypatch.setenv("ITERATE_ENGINE", "always")
    reset_caches()
    with athena_sync(), route_lambdas() as calls:
        _, created = _api("POST", "/datasets", {"name": "Orders", "fileName": "orders.csv"})
        dataset_id, key = created["dataset"]["datasetId"], created["upload"]["key"]
        version = machine["s3"].put_object(Bucket=BUCKET, Key=key, Body=sample, ChecksumAlgorithm="SHA256")[
            "VersionId"
        ]
        DynamoRunRepository(machine["table"], "alice").record_upload(
            dataset_id, {"bucket": BUCKET, "key": key, "versionId": version}
        )
        _, queued = _api("POST", f"/datasets/{dataset_id}/runs", {})
        assert admit_queued() == [queued["runId"]]
        arn = machine["arn"].replace(":stateMachine:", ":execution:")
        assert _wait_for_end(machine["sfn"], f"{arn}:{queued['runId']}")["status"] == "SUCCEEDED"
        # When its quick fixes are applied
        status, job = _api(
            "POST", f"/runs/{queued['runId']}/fixes", {"quick": True, "confirm": ["drop", "clear"]}
        )
        assert status == 202, job
        status, fixed = _api("GET", job["statusUrl"])
    # Then the worker recognised the run's input by S3's checksum and wrote the version
    assert any(name == "chunk" for name, _ in calls)  # the run did take the engine path
    assert status == 200 and fixed["status"] == "SUCCEEDED", fixed
    assert fixed["version"]["issuesApplied"]


def _register(glue: Any, name: str, owner: str, run_id: str) -> None:
    from iterate.aws.engine_tables import marks

    glue.create_table(
        DatabaseName=ENGINE_DATABASE,
        TableInput={
            "Name": name,
            "Parameters": {"classification": "parquet", **marks(owner, run_id)},
            "StorageDescriptor": {"Columns": [{"Name": "c0", "Type": "string"}], "Location": "s3://x/y/"},
        },
    )


def test_a_run_that_fails_between_engine_rounds_leaves_no_tables_and_touches_no_other_runs(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, bench_csv: Path
) -> None:
    from iterate.aws.engine_tables import glue_names

    # Given the tables of another run of the same owner, and one named like this run's but marked as bob's
    glue = boto3.client("glue", region_name=REGION)
    others = [glue_names("r-other")["parts"], glue_names("r-other")["offsets"], "rfailing_x_bob"]
    _register(glue, others[0], "alice", "r-other")
    _register(glue, others[1], "alice", "r-other")
    _register(glue, others[2], "bob", "r-failing")
    # And an upload on the engine path whose profile function dies at its third round, once its tables exist
    _engine_env(monkeypatch)
    key = "uploads/alice/failing/orders.csv"
    version = machine["s3"].put_object(Bucket=BUCKET, Key=key, Body=bench_csv.read_bytes())["VersionId"]
    real = load_handler("profile").lambda_handler
    rounds: list[set[str]] = []

    def dies_at_the_third_round(event: dict[str, Any], context: Any) -> Any:
        if event.get("action") == "engine":
            rounds.append({t["Name"] for t in glue.get_tables(DatabaseName=ENGINE_DATABASE)["TableList"]})
            if len(rounds) == 3:
                raise RuntimeError("injected: the function died between the engine's rounds")
        return real(event, context)

    request = {
        "trigger": "api",
        "owner": "alice",
        "datasetId": "failing",
        "runId": "r-failing",
        "source": {"bucket": BUCKET, "key": key, "versionId": version},
    }
    # When the state machine runs it
    with athena_sync(), route_lambdas({"profile": dies_at_the_third_round}):
        done = run_execution(machine["sfn"], machine["arn"], request, timeout_s=120)
    # Then the run FAILED with the injected error, after its tables were registered
    assert done["status"] == "FAILED"
    own = glue_names("r-failing")
    assert {own["parts"], own["offsets"]} <= rounds[2]
    assert len(rounds[2] - set(others)) > 2  # the parts, the offsets and a table a statement joined
    record = DynamoRunRepository(machine["table"], "alice").get_run("r-failing")
    assert record is not None and record["status"] == "FAILED" and record["error"] == "RuntimeError"
    # And none of its tables remain, while the other run's and bob's are untouched
    left = {t["Name"] for t in glue.get_tables(DatabaseName=ENGINE_DATABASE)["TableList"]}
    assert left == set(others)


def test_a_statement_that_fails_on_athena_leaves_no_tables(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, bench_csv: Path
) -> None:
    # Given a workgroup whose scan limit stops a statement after the run's tables were registered
    _engine_env(monkeypatch)
    # When the run fails at that statement (RunEngineQuery's Catch)
    done, _, athena = _run(machine, bench_csv.read_bytes(), "cutoff-tables", cutoff_bytes=50_000)
    # Then RecordFailure removed the run's tables
    assert done["status"] == "FAILED" and athena.queries
    glue = boto3.client("glue", region_name=REGION)
    assert glue.get_tables(DatabaseName=ENGINE_DATABASE)["TableList"] == []


def test_on_athena_a_models_proof_counts_over_every_row_only_where_it_is_the_issues_predicate(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sys.path.insert(0, str(REPO / "tests" / "engine"))
    from proof_agents import BAD, HYPOTHESIS, ROWS, model_agents, write_orders

    # Given 6,000 rows on the engine path (a 1,000-row sample), and a model that writes the proofs of the
    # placeholder quantity and of a hypothesis of its own
    _engine_env(monkeypatch)
    src = tmp_path / "orders.csv"
    expensive = write_orders(src)
    for name in ("analyze", "investigate"):
        load_handler(name)._deps().agents_factory = model_agents
    # When the state machine runs it (statements on Athena, proofs in the sandbox function on the sample)
    done, calls, athena = _run(machine, src.read_bytes(), "proofs")
    assert done["status"] == "SUCCEEDED", calls.failures
    assert athena.queries
    prefix = json.loads(done["output"])["run"]["prefix"]
    analysis = json.loads(
        machine["s3"].get_object(Bucket=BUCKET, Key=prefix + "analysis.json")["Body"].read()
    )
    issues = {i["id"]: i for i in analysis["issues"]}
    # Then the model's proof of the placeholder ran on the sample and its claim there is the predicate's: the
    # count shown is Athena's over all 6,000 rows
    quantity = next(
        i for i in issues.values() if i["source"] == "detector" and i["affectedColumns"] == ["quantity"]
    )
    assert quantity["investigation"]["source"] == "llm" and quantity["status"] == "confirmed"
    stats = quantity["evidence"]["stats"]
    assert quantity["affectedRows"] == quantity["evidence"]["affectedRows"] == len(BAD)
    assert stats["proof_population_rows"] == len(BAD) > stats["proof_sample_rows"] > 0
    assert f"over all {ROWS:,} rows: {len(BAD)}" in stats["proof_recount"]
    # And the hypothesis, which no predicate counts, shows the sample's count as the sample's, with its size
    hypothesis = issues[HYPOTHESIS]
    sample = int(stats["sample_rows"])
    claimed = hypothesis["investigation"]["output"]["affected_rows"]
    assert hypothesis["status"] == "unverified" and hypothesis["evidence"]["sampleRows"] == sample < ROWS
    assert hypothesis["evidence"]["affectedRows"] == claimed < expensive
    assert f"Counted on a sample of {sample:,} of the {ROWS:,} rows" in hypothesis["description"]
    prices = [r["price"] for r in csv.DictReader(io.StringIO(src.read_text()))]
    examples = hypothesis["evidence"]["examples"]
    assert examples and all(
        prices[e["row"]] == e["value"] for e in examples
    )  # the file's rows, not the sample's
    html = machine["s3"].get_object(Bucket=BUCKET, Key=prefix + "report.html")["Body"].read().decode()
    assert f"of a {sample:,}-row sample" in html and f"not over all {ROWS:,} rows" in html
