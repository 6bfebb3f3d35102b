"""The engine path on AWS: inputs past one Lambda, analysed by Amazon Athena over a Parquet copy (docs/aws-large.md).

The ProfileChunks Map writes each byte range of the upload once as a Parquet part (its text columns, `__chunk`
and `__local`, the row's place in its range) under the run's `engine/parts/`; EngineStep (the profile function,
`action: engine`) registers the parts as a Glue table for the run, beside a table of each range's first row, and
runs the engine path's own code (`iterate.engine.summaries.summarize`, detection on the sample,
`iterate.engine.step.decide_and_count`) over an `AthenaSource`. Every statement that source is asked for is
rendered for Trino over the relation `t` (the parts joined to their offsets: `__row` is the file's data row) and
wrapped in an UNLOAD to Parquet under `engine/results/<key>/`, `key` being a digest of the statement. A result
not there yet stops the step with the statement (`QueryNeeded`); the state machine runs it
(`athena:startQueryExecution.sync`, RunEngineQuery) and calls EngineStep again, which replays the same
deterministic code, now finding that result, up to the next statement or the end: eight rounds for a table.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from iterate.aws import cost as cost_model
from iterate.aws import engine_tables
from iterate.aws.payloads import (
    PARTIAL_TAG_KEY,
    PARTIAL_TAG_VALUE,
    ChunkedRead,
    EngineLoop,
    EngineStepInput,
    RunState,
)
from iterate.aws.sources import content_identity
from iterate.engine import statements as sql

if TYPE_CHECKING:
    from iterate.engine.project import Counted, Projection
    from iterate.settings import Settings

PARTS = "chunks/parquet/"  # under chunks/: all the chunk function may write
RESULTS = "engine/results/"
TABLES = "engine/tables/"
PLAN = "engine/plan.json"
DONE = "engine/done.json"
# Athena refuses a statement over 262,144 bytes; Step Functions a state over 256 KiB (the statement travels in
# the state): a statement is kept well under both, and one over it fails the run naming the limit.
MAX_STATEMENT_BYTES = 200_000
PART_ROWS_METADATA = "rows"
_HEADS = 8


class EngineInputError(RuntimeError):
    """The upload cannot be analysed on the engine path (a range it cannot read alone, columns Athena cannot
    tell apart, a statement past Athena's limit): RecordFailure keeps this message as the run's reason."""


class QueryNeeded(Exception):  # a control signal, not a failure: the state machine runs the query
    """A statement whose result is not in S3 yet: EngineStep returns it for RunEngineQuery."""

    def __init__(self, query: str, key: str) -> None:
        super().__init__(key)
        self.query = query
        self.key = key


def routes_to_engine(file_name: str, size: int, settings: Settings) -> bool:
    """Whether an upload of this size is analysed on the engine path on AWS (Athena): the local rule
    (`iterate.engine.route`: a delimited text file of ITERATE_ENGINE_BYTES or more, or ITERATE_ENGINE=always)."""
    from iterate.engine.route import ENGINE_FORMATS

    if settings.engine == "never" or PurePosixPath(file_name).suffix.lower() not in ENGINE_FORMATS:
        return False
    return settings.engine == "always" or size >= settings.engine_bytes


def allowed_bytes(file_name: str, settings: Settings) -> int:
    """The largest upload a run takes: ITERATE_ENGINE_MAX_BYTES where the engine path reads it (the table is
    never held by one process there), ITERATE_MAX_FILE_BYTES elsewhere."""
    if routes_to_engine(file_name, settings.engine_max_bytes, settings):
        return max(settings.engine_max_bytes, settings.max_file_bytes)
    return settings.max_file_bytes


def glue_names(run: RunState) -> dict[str, str]:
    """The run's Glue tables (lower case: Glue keeps names so), in the deployment's engine database."""
    return engine_tables.glue_names(run.runId)


def write_part(s3: Any, run: RunState, index: int, columns: list[pa.Array], rows: int) -> str:
    """One range's rows as a Parquet part of the run's copy: columns c0..cN as text, `__chunk` and `__local`.
    Tagged as a chunk partial: the bucket's lifecycle rule expires it with the others."""
    names = [f"c{i}" for i in range(len(columns))]
    table = pa.Table.from_arrays(
        [*columns, pa.array([index] * rows, pa.int32()), pa.array(range(rows), pa.int64())],
        names=[*names, "__chunk", "__local"],
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="snappy")
    key = run.prefix + PARTS + f"part-{index:05d}.parquet"
    s3.put_object(
        Bucket=run.bucket,
        Key=key,
        Body=sink.getvalue(),
        ContentType="application/vnd.apache.parquet",
        Metadata={PART_ROWS_METADATA: str(rows)},
        Tagging=f"{PARTIAL_TAG_KEY}={PARTIAL_TAG_VALUE}",
    )
    return key


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="snappy")
    return sink.getvalue()


_GLUE_TYPES = {pa.string(): "string", pa.int64(): "bigint", pa.int32(): "int", pa.float64(): "double"}


class Catalog:
    """The run's tables in the Glue Data Catalog, each over Parquet under its own S3 prefix, each marked with
    its owner and run (`engine_tables.marks`) so that a run ending early removes its own tables only."""

    def __init__(self, glue: Any, database: str, run: RunState) -> None:
        self.glue = glue
        self.database = database
        self.bucket = run.bucket
        self.marks = engine_tables.marks(run.owner, run.runId)

    def register(self, name: str, prefix: str, schema: Iterable[tuple[str, str]]) -> None:
        table = {
            "Name": name,
            "TableType": "EXTERNAL_TABLE",
            "Parameters": {"classification": "parquet", "EXTERNAL": "TRUE", **self.marks},
            "StorageDescriptor": {
                "Columns": [{"Name": n, "Type": t} for n, t in schema],
                "Location": f"s3://{self.bucket}/{prefix}",
                "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
                "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
                "SerdeInfo": {
                    "SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
                },
            },
        }
        # A replayed step registers the same table again: the first one stands.
        with contextlib.suppress(self.glue.exceptions.AlreadyExistsException):
            self.glue.create_table(DatabaseName=self.database, TableInput=table)

    def drop(self, names: list[str]) -> None:
        for start in range(0, len(names), 100):
            self.glue.batch_delete_table(
                DatabaseName=self.database, TablesToDelete=names[start : start + 100]
            )


class AthenaSource:
    """The relation `t` on Athena, for the engine's summaries and flags: each statement's result read back
    from S3 where an earlier round left it, or `QueryNeeded`."""

    dialect: sql.Dialect = "trino"

    def __init__(
        self, s3: Any, catalog: Catalog, run: RunState, plan: dict[str, Any], done: dict[str, Any]
    ) -> None:
        self.s3 = s3
        self.catalog = catalog
        self.run = run
        self.plan = plan
        self.done = done
        self.columns: list[str] = list(plan["columns"])
        self.registered: dict[str, str] = {}
        self.tables: list[str] = []
        self.timings: dict[str, float] = {}

    @property
    def con(self) -> AthenaSource:  # summarize registers its tables through `source.con`, as on DuckDB
        return self

    def register(self, name: str, table: pa.Table) -> None:
        """A small table the statements join (the rows to fetch, an issue's keys): Parquet under the run's
        engine/tables/, a Glue table named by its content (a replay registers the same one)."""
        data = _parquet_bytes(table)
        glue_name = f"{self.plan['names']['stem']}_{re.sub(r'[^a-z0-9]', '', name.lower())}_"
        glue_name += hashlib.sha256(data).hexdigest()[:12]
        prefix = self.run.prefix + TABLES + glue_name + "/"
        if glue_name not in self.plan.setdefault("registered", {}):
            self.s3.put_object(Bucket=self.run.bucket, Key=prefix + "data.parquet", Body=data)
            schema = [(f.name, _GLUE_TYPES.get(f.type, "string")) for f in table.schema]
            self.catalog.register(glue_name, prefix, schema)
            self.plan["registered"][glue_name] = True
        self.registered[name] = glue_name
        self.tables.append(glue_name)

    def unregister(self, name: str) -> None:
        self.registered.pop(name, None)

    def _relation(self) -> str:
        names = self.plan["names"]
        cols = ", ".join(f'p."c{i}" AS {sql.quoted(c)}' for i, c in enumerate(self.columns))
        return (
            f'SELECT o."start" + p."__local" AS "{sql.ROW}", {cols} FROM "{names["parts"]}" AS p '
            f'JOIN "{names["offsets"]}" AS o ON p."__chunk" = o."chunk"'
        )

    def athena_sql(self, statement: sql.Statement) -> tuple[str, str]:
        """The statement as Athena runs it, over `t`, unloaded to Parquet; and its result's key."""
        from sqlglot import exp

        tree = statement.expression.copy()
        for table in tree.find_all(exp.Table):
            if table.name in self.registered:
                table.set("this", exp.to_identifier(self.registered[table.name], quoted=True))
        tree = tree.with_(sql.RELATION, as_=self._relation(), dialect="trino")  # type: ignore[attr-defined]
        inner = tree.sql(dialect="trino", identify=True)
        key = hashlib.sha256(inner.encode()).hexdigest()[:24]
        location = f"s3://{self.run.bucket}/{self.run.prefix}{RESULTS}{key}/"
        query = f"UNLOAD ({inner}) TO '{location}' WITH (format = 'PARQUET', compression = 'SNAPPY')"
        if len(query.encode()) > MAX_STATEMENT_BYTES:
            raise EngineInputError(
                f"the engine's statement {statement.name} is {len(query.encode()):,} bytes, past the "
                f"{MAX_STATEMENT_BYTES:,} a statement may take on Athena (a table of very many columns)"
            )
        return query, key

    def _result(self, statement: sql.Statement) -> pa.Table:
        query, key = self.athena_sql(statement)
        if key not in self.done:
            raise QueryNeeded(query, key)
        started = time.perf_counter()
        prefix = self.run.prefix + RESULTS + key + "/"
        keys = _list(self.s3, self.run.bucket, prefix)
        parts = [
            pq.read_table(pa.BufferReader(self.s3.get_object(Bucket=self.run.bucket, Key=k)["Body"].read()))
            for k in sorted(keys)
        ]
        parts = [p for p in parts if p.num_columns]
        if parts:
            table = pa.concat_tables(parts, promote_options="permissive")
        else:  # UNLOAD writes no file for no rows: the statement's own column names, no rows
            names = [n for n in statement.expression.named_selects if n != "*"]  # type: ignore[attr-defined]
            table = pa.table({n: pa.array([], pa.string()) for n in names})
        if sql.ROW in table.column_names:  # Athena writes files in parallel: file order is restored here
            table = table.sort_by(sql.ROW)
        self.timings[statement.name] = round(
            self.timings.get(statement.name, 0.0) + time.perf_counter() - started, 2
        )
        return table

    def one(self, statement: sql.Statement) -> dict[str, Any]:
        rows = self._result(statement).to_pylist()
        return dict(rows[0]) if rows else {}

    def arrow(self, statement: sql.Statement) -> pa.Table:
        return self._result(statement)


def _list(s3: Any, bucket: str, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", []) if o["Size"] > 0]
    return keys


def count_and_flag(source: AthenaSource, projected: list[Projection]) -> Counted:
    """Each issue's cells over every row (`flags_by_keys` against the issue's keys registered as a table): every
    issue's counts in one statement, then the cells of the issues that flag in one more (flags.csv). The counts
    come first so that the flags, the one result that grows with the rows, are read by the last round only."""
    from iterate.engine.project import Counted

    live = [p for p in projected if p.keys]
    counted = Counted()
    if not live:
        return counted
    joins: list[str] = []
    flagging: list[str] = []
    for i, p in enumerate(live):
        keys = pa.table({"k": pa.array(p.keys, pa.string()), "score": pa.array(p.scores, pa.float64())})
        source.register(f"keys_{i}", keys)
        joined = sql.flags_by_keys(p.key_columns, f"keys_{i}", p.column, p.issue_id).sql("duckdb")
        joins.append(joined)
        if p.flag:
            flagging.append(joined)
    # One column: a row holds one cell of it; several: a row is counted once (COUNT DISTINCT either way).
    counts = source.arrow(
        sql._parse(
            "issue_counts",
            f"SELECT issue_id, COUNT(*) AS cells, COUNT(DISTINCT row) AS rows FROM ({' UNION ALL '.join(joins)}) "
            "AS u GROUP BY issue_id",
        )
    ).to_pylist()
    for r in counts:
        counted.cells[r["issue_id"]], counted.rows[r["issue_id"]] = int(r["cells"]), int(r["rows"])
    if flagging:
        flags = source.arrow(sql._parse("flags", " UNION ALL ".join(flagging)))
        if flags.num_rows:
            schema = pa.schema(
                [
                    ("row", pa.int64()),
                    ("column", pa.string()),
                    ("issue_id", pa.string()),
                    ("score", pa.float64()),
                ]
            )
            flags = (
                flags.select(["row", "col", "issue_id", "score"]).rename_columns(schema.names).cast(schema)
            )
            counted.flags = flags.sort_by(
                [("row", "ascending"), ("column", "ascending"), ("issue_id", "ascending")]
            )
    for i in range(len(live)):
        source.unregister(f"keys_{i}")
    return counted


def _offsets(s3: Any, run: RunState, count: int) -> list[int]:
    """Each range's first data row: the rows of the parts before it (from each part's metadata)."""

    def rows(index: int) -> int:
        key = run.prefix + PARTS + f"part-{index:05d}.parquet"
        try:
            head = s3.head_object(Bucket=run.bucket, Key=key)
        except s3.exceptions.ClientError:
            raise EngineInputError(
                f"range {index} of {count} has no Parquet part: its chunk function could not read it alone (a"
                " quoted value spanning lines, a ragged or blank line). The engine path reads a CSV whose every"
                " record is one line; split the file, or make it one record per line"
            ) from None
        return int(head["Metadata"][PART_ROWS_METADATA])

    with ThreadPoolExecutor(max_workers=_HEADS) as pool:
        counts = list(pool.map(rows, range(count)))
    starts, total = [], 0
    for n in counts:
        starts.append(total)
        total += n
    return starts


def _plan(
    deps_s3: Any,
    source_s3: Any,
    catalog: Catalog,
    store: Any,
    run: RunState,
    chunked: ChunkedRead,
    settings: Settings,
) -> dict[str, Any]:
    """The first round: the file's column names (its head), each range's first row, the run's tables."""
    from iterate.aws.chunks import ObjectRanges
    from iterate.io import ReadLimits
    from iterate.io.reader import text_layout

    text = text_layout(
        PurePosixPath(chunked.fileName),  # type: ignore[arg-type]
        chunked.size,
        ObjectRanges(source_s3, chunked.source, chunked.size),
        limits=ReadLimits.from_settings(settings),
    )
    if text is None:
        raise EngineInputError("the file's head does not read as a plain CSV/TSV with a header row")
    columns = list(text.layout.names)
    folded = [c.lower() for c in columns]
    if len(set(folded)) != len(folded):
        raise EngineInputError(
            "two columns' names differ only in letter case, which Athena does not tell apart: rename one"
        )
    names = glue_names(run)
    starts = _offsets(deps_s3, run, chunked.count)
    width = chunked.parse.width
    catalog.register(
        names["parts"],
        run.prefix + PARTS,
        [*((f"c{i}", "string") for i in range(width)), ("__chunk", "int"), ("__local", "bigint")],
    )
    offsets = pa.table(
        {"chunk": pa.array(range(len(starts)), pa.int32()), "start": pa.array(starts, pa.int64())}
    )
    offsets_prefix = run.prefix + TABLES + names["offsets"] + "/"
    deps_s3.put_object(Bucket=run.bucket, Key=offsets_prefix + "data.parquet", Body=_parquet_bytes(offsets))
    catalog.register(names["offsets"], offsets_prefix, [("chunk", "int"), ("start", "bigint")])
    head = source_s3.head_object(
        Bucket=chunked.source.bucket,
        Key=chunked.source.key,
        ChecksumMode="ENABLED",
        **({"VersionId": chunked.source.versionId} if chunked.source.versionId else {}),
    )
    plan = {
        "columns": columns,
        "names": names,
        "registered": {},
        "contentHash": content_identity(head),
        "format": "tsv" if chunked.parse.delimiter == "\t" else "csv",
    }
    store.put_bytes(PLAN, json.dumps(plan).encode(), content_type="application/json")
    return plan


def engine_step(payload: EngineStepInput, deps: Any) -> EngineLoop:
    """One round of the engine path on Athena: the next statement to run, or (once every result is in S3)
    the profile step's artifacts written as the engine path writes them locally."""
    from iterate.aws import steps
    from iterate.aws.sources import source_client
    from iterate.engine.pipeline import write_engine_result
    from iterate.engine.step import decide_and_count
    from iterate.engine.summaries import summarize
    from iterate.table import SourceInfo

    run, chunked, loop = payload.run, payload.chunked, payload.engine
    store = steps.artifact_store(deps, run)
    catalog = Catalog(deps.glue_client(), deps.config.engine_database, run)
    s3 = deps.s3_client()
    settings = deps.settings
    started = time.perf_counter()
    meter = cost_model.StepMeter.start(cost_model.TRANSITIONS["engine_round"])
    done: dict[str, Any] = json.loads(store.get_bytes(DONE)) if store.exists(DONE) else {}
    if loop.ran is not None and loop.key:
        done[loop.key] = loop.ran
        store.put_bytes(DONE, json.dumps(done).encode(), content_type="application/json")
    plan = (
        json.loads(store.get_bytes(PLAN))
        if loop.ran is not None
        else _plan(s3, source_client(deps, chunked.source, run.owner), catalog, store, run, chunked, settings)
    )
    source = AthenaSource(s3, catalog, run, plan, done)
    timings: dict[str, float] = {}
    name = PurePosixPath(chunked.fileName).stem
    try:
        # Every round is the profile step's: its progress, a cancelled run refused, its cost booked.
        with steps.running_step(deps, run, "profile", task="engine") as ctx:
            summaries = summarize(source, sample_rows=settings.engine_sample_rows)
            if summaries.n_rows == 0:
                raise EngineInputError("the file has no data rows")
            info = SourceInfo(
                path=chunked.fileName,
                format=plan["format"],
                size_bytes=chunked.size,
                content_hash=plan["contentHash"],
            )
            result = decide_and_count(
                summaries,
                info,
                lambda projected: count_and_flag(source, projected),
                name=name,
                timings=timings,
            )
            result.statements_s = {
                **source.timings,
                "athenaStatements": float(len(done)),
                "athenaBytesScanned": float(sum(int(d.get("bytes") or 0) for d in done.values())),
            }
            summary = write_engine_result(
                ctx, result, started=started, name=name, source_file=chunked.fileName
            )
    except QueryNeeded as needed:
        store.put_bytes(PLAN, json.dumps(plan).encode(), content_type="application/json")
        elapsed_ms = (time.perf_counter() - started) * 1000
        steps.book_infra(
            steps.repository(deps, run.owner),
            run.runId,
            "profile",
            meter.finish(elapsed_ms, deps.config.function_memory_mb),
        )
        return EngineLoop(names=plan["names"], query=needed.query, key=needed.key)
    catalog.drop([plan["names"]["parts"], plan["names"]["offsets"], *plan.get("registered", {})])
    return EngineLoop(names=plan["names"], done=True, summary=steps._jsonable(summary))
