"""Athena under moto: the state machine's `athena:startQueryExecution.sync` Tasks answered end to end.

moto 5.2 records Athena query executions but runs no SQL, and its Step Functions interpreter has no `.sync`
integration for Athena. `athena_sync()` adds that integration to moto's interpreter: the Task starts the query
in moto's Athena (so the execution is recorded, with its id, workgroup and database), and the query itself is
run here on DuckDB, as Athena would run it: the UNLOAD's SELECT, read back from Trino into DuckDB by sqlglot
(the product writes Trino), over the run's Glue tables (Parquet in moto's S3), its result written as Parquet
under the UNLOAD's location. The statistics returned are measured: `DataScannedInBytes` is the compressed size
of the Parquet column chunks the statement reads (Athena bills Parquet by the columns it reads), never a
made-up figure. Only the SQL shapes the engine path writes are supported (UNLOAD of a SELECT).
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

REGION = "us-east-1"
_UNLOAD = re.compile(
    r"^UNLOAD \((?P<query>.*)\) TO '(?P<location>s3://[^']+)' WITH \((?P<options>[^)]*)\)$", re.S
)
# Trino functions DuckDB lacks, as DuckDB macros of the same meaning for these statements (a 64-bit row hash).
_MACROS = (
    "CREATE OR REPLACE MACRO xxhash64(b) AS hash(b)",
    "CREATE OR REPLACE MACRO from_big_endian_64(x) AS x",
)


@dataclass
class AthenaRecord:
    """What the fake ran: per query its id, the SQL, bytes scanned and seconds."""

    queries: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def bytes_scanned(self) -> int:
        return sum(int(q["bytes"]) for q in self.queries)


def _s3_download(s3: Any, location: str, into: Path) -> list[Path]:
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    files = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            if not o["Key"].endswith(".parquet") or o["Size"] == 0:
                continue
            path = into / o["Key"].replace("/", "_")
            path.write_bytes(s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read())
            files.append(path)
    return files


def _read_columns(query: str, tables: dict[str, list[Path]]) -> dict[str, set[str] | None]:
    """Per table the columns the statement reads (None: all of them), through the `t` view's aliases."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(query, read="trino")
    view = tree.find(exp.CTE)
    outer = tree.copy()
    for key in (
        "with",
        "with_",
    ):  # the CTE's own columns are not the statement's (sqlglot names the arg either way)
        if outer.args.get(key) is not None:
            outer.set(key, None)
    used: dict[str, set[str] | None] = {}
    # `SELECT *` reads every column; COUNT(*) reads none
    star = any(not isinstance(s.parent, exp.Count) for s in outer.find_all(exp.Star))
    referenced = {c.name for c in outer.find_all(exp.Column)}
    if view is not None:
        aliases = {s.alias_or_name: {c.name for c in s.find_all(exp.Column)} for s in view.this.expressions}
        parts = next(t.name for t in view.find_all(exp.Table) if t.name.endswith("_parts"))
        wanted = {"__chunk", "__local"}
        for name, cols in aliases.items():
            if star or name in referenced:
                wanted |= cols
        used[parts] = wanted
        for t in view.find_all(exp.Table):
            if t.name != parts:
                used[t.name] = None
    for t in outer.find_all(exp.Table):
        if t.name in tables:
            used[t.name] = None
    return used


def _scanned(files: list[Path], columns: set[str] | None) -> int:
    import pyarrow.parquet as pq

    total = 0
    for f in files:
        meta = pq.ParquetFile(f).metadata
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            for c in range(rg.num_columns):
                col = rg.column(c)
                if columns is None or col.path_in_schema in columns:
                    total += col.total_compressed_size
    return total


def run_on_duckdb(query: str, database: str, record: AthenaRecord, query_id: str) -> None:
    """The UNLOAD run on DuckDB over the database's Glue tables; its Parquet result put where it says."""
    import boto3
    import duckdb
    import sqlglot

    match = _UNLOAD.match(query.strip())
    assert match, f"the fake Athena runs the engine path's UNLOAD statements only: {query[:120]}"
    inner, location = match["query"], match["location"]
    s3 = boto3.client("s3", region_name=REGION)
    glue = boto3.client("glue", region_name=REGION)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fake-athena-") as tmp:
        con = duckdb.connect(":memory:")
        for macro in _MACROS:
            con.execute(macro)
        tables: dict[str, list[Path]] = {}
        for page in glue.get_paginator("get_tables").paginate(DatabaseName=database):
            for table in page["TableList"]:
                name = table["Name"]
                if name not in inner:
                    continue
                folder = Path(tmp) / name
                folder.mkdir()
                files = _s3_download(s3, table["StorageDescriptor"]["Location"], folder)
                tables[name] = files
                listed = ", ".join(f"'{f}'" for f in files)
                con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM read_parquet([{listed}])')
        duck_sql = sqlglot.transpile(inner, read="trino", write="duckdb")[0]
        out = Path(tmp) / "result.parquet"
        con.execute(f"COPY ({duck_sql}) TO '{out}' (FORMAT PARQUET)")
        n = con.execute(f"SELECT COUNT(*) FROM read_parquet('{out}')").fetchone()[0]  # type: ignore[index]
        con.close()
        bucket, _, prefix = location.removeprefix("s3://").partition("/")
        if n:  # as Athena, no file for no rows
            s3.put_object(Bucket=bucket, Key=prefix + "part-00000.parquet", Body=out.read_bytes())
        scanned = sum(_scanned(tables.get(t, []), cols) for t, cols in _read_columns(inner, tables).items())
    with record.lock:
        record.queries.append(
            {"id": query_id, "sql": query, "bytes": scanned, "rows": n, "s": time.perf_counter() - started}
        )


def _backend(region: str) -> Any:
    """moto's Athena, in process: botocore 1.44 speaks rest-json to Athena, which moto 5.2's Athena (JSON at
    "/") does not route, so the integration calls the backend the HTTP route would have reached."""
    from moto.athena.models import athena_backends
    from moto.core import DEFAULT_ACCOUNT_ID

    return athena_backends[DEFAULT_ACCOUNT_ID][region]


def _task_failed(env: Any, task: Any, cause: dict[str, Any]) -> Exception:
    import json

    from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    return FailureEventException(
        FailureEvent(
            env=env,
            error_name=StatesErrorName(typ=StatesErrorNameType.StatesTaskFailed),
            event_type=HistoryEventType.TaskFailed,
            event_details=EventDetails(
                taskFailedEventDetails=TaskFailedEventDetails(
                    resource=task._get_sfn_resource(),
                    resourceType=task._get_sfn_resource_type(),
                    error=StatesErrorNameType.StatesTaskFailed.to_name(),
                    cause=json.dumps(cause),
                )
            ),
        )
    )


def executions() -> list[Any]:
    """Every query execution moto's Athena recorded."""
    return list(_backend(REGION).executions.values())


@contextlib.contextmanager
def athena_sync(
    record: AthenaRecord | None = None, *, cutoff_bytes: int | None = None
) -> Iterator[AthenaRecord]:
    """moto's Step Functions interpreter with an `athena:startQueryExecution.sync` integration (see above).
    `cutoff_bytes`: the workgroup's per-query scan limit; a statement past it ends FAILED, as Athena cancels it,
    and the Task fails with States.TaskFailed and the execution as its cause (what Step Functions does)."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import state_task_factory
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import (
        ResourceCondition,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
        StateTaskServiceCallback,
    )

    record = record or AthenaRecord()
    original = state_task_factory.state_task_service_for

    class AthenaService(StateTaskServiceCallback):
        def __init__(self) -> None:
            super().__init__(supported_integration_patterns={ResourceCondition.Sync})

        def _get_supported_parameters(self) -> set[str]:
            return {
                "QueryString",
                "WorkGroup",
                "QueryExecutionContext",
                "ResultConfiguration",
                "ClientRequestToken",
            }

        def _eval_service_task(
            self,
            env: Any,
            resource_runtime_part: Any,
            normalised_parameters: dict[str, Any],
            state_credentials: Any,
        ) -> None:
            params = normalised_parameters
            query_id = _backend(resource_runtime_part.region).start_query_execution(
                query=params["QueryString"],
                context=params.get("QueryExecutionContext"),
                config=params.get("ResultConfiguration"),
                workgroup=params.get("WorkGroup"),
                execution_parameters=None,
            )
            run_on_duckdb(
                params["QueryString"], params["QueryExecutionContext"]["Database"], record, query_id
            )
            env.stack.append({"QueryExecutionId": query_id})

        def _eval_integration_pattern(
            self,
            env: Any,
            resource_runtime_part: Any,
            normalised_parameters: dict[str, Any],
            state_credentials: Any,
        ) -> None:
            # `.sync`: poll the execution until it ends (moto moves it QUEUED, RUNNING, SUCCEEDED per call).
            started = env.stack.pop()
            backend = _backend(resource_runtime_part.region)
            while True:
                execution = backend.get_query_execution(started["QueryExecutionId"])
                if execution.status in ("SUCCEEDED", "FAILED", "CANCELLED"):
                    break
            ran = next(q for q in record.queries if q["id"] == started["QueryExecutionId"])
            if cutoff_bytes is not None and ran["bytes"] > cutoff_bytes:
                raise _task_failed(
                    env,
                    self,
                    {
                        "QueryExecutionId": execution.id,
                        "Status": {
                            "State": "FAILED",
                            "StateChangeReason": "Query cancelled! Bytes scanned limit was exceeded",
                        },
                        "Statistics": {"DataScannedInBytes": ran["bytes"]},
                    },
                )
            env.stack.append(
                {
                    "QueryExecution": {
                        "QueryExecutionId": execution.id,
                        "Query": execution.query,
                        "StatementType": "DML",
                        "QueryExecutionContext": execution.context,
                        "WorkGroup": normalised_parameters.get("WorkGroup"),
                        "Status": {"State": execution.status},
                        "Statistics": {
                            "DataScannedInBytes": ran["bytes"],
                            "EngineExecutionTimeInMillis": int(ran["s"] * 1000),
                        },
                    }
                }
            )

    def service_for(service_name: str) -> Any:
        return AthenaService() if service_name == "athena" else original(service_name)

    with mock.patch.object(state_task_factory, "state_task_service_for", service_for):
        yield record
