"""The engine path's AWS pieces that need no AWS: routing, limits, content identity, statements for Athena."""

from __future__ import annotations

import pytest
import sqlglot

from iterate.aws.large import (
    MAX_STATEMENT_BYTES,
    AthenaSource,
    EngineInputError,
    QueryNeeded,
    allowed_bytes,
    content_identity,
    glue_names,
    routes_to_engine,
)
from iterate.aws.payloads import RunState, S3ObjectRef
from iterate.engine import statements as sql
from iterate.settings import Settings

GiB = 1024**3


def _run() -> RunState:
    return RunState(
        runId="r-ABC123",
        owner="alice",
        datasetId="d1",
        trigger="s3",
        bucket="b",
        prefix="artifacts/alice/d1/r-ABC123/",
        source=S3ObjectRef(bucket="b", key="uploads/alice/d1/big.csv"),
        startedAt="2026-12-07T00:00:00Z",
    )


def _source(columns: list[str], done: dict[str, object] | None = None) -> AthenaSource:
    names = glue_names(_run())
    plan = {"columns": columns, "names": names, "registered": {}}
    return AthenaSource(None, None, _run(), plan, done or {})  # type: ignore[arg-type]


def test_a_delimited_file_past_the_engine_threshold_routes_to_the_engine_and_others_do_not() -> None:
    settings = Settings()
    assert routes_to_engine("big.csv", 2 * GiB, settings) and routes_to_engine("big.TSV", 3 * GiB, settings)
    assert not routes_to_engine("small.csv", GiB, settings)
    assert not routes_to_engine("big.parquet", 10 * GiB, settings)
    assert routes_to_engine("small.csv", 10, Settings(engine="always"))
    assert not routes_to_engine("big.csv", 10 * GiB, Settings(engine="never"))


def test_the_engine_paths_own_limit_applies_only_where_the_engine_reads_the_file() -> None:
    settings = Settings()
    assert allowed_bytes("big.csv", settings) == settings.engine_max_bytes == 200 * 10**9
    assert allowed_bytes("big.xlsx", settings) == settings.max_file_bytes
    assert allowed_bytes("big.csv", Settings(engine="never")) == settings.max_file_bytes


def test_content_identity_is_s3s_checksum_then_the_etag_with_the_version() -> None:
    full = {"ChecksumSHA256": "abc=", "ChecksumType": "FULL_OBJECT", "VersionId": "v1", "ETag": '"e"'}
    assert content_identity(full) == "s3-sha256-full_object:abc=@v1"
    parts = {"ChecksumSHA256": "xyz=-3", "ChecksumType": "COMPOSITE", "ETag": '"m-3"'}
    assert content_identity(parts) == "s3-sha256-composite:xyz=-3"
    assert content_identity({"ETag": '"d41d8"', "VersionId": "null"}) == "s3-etag:d41d8"


def test_a_statement_for_athena_is_the_trino_rendering_over_t_unloaded_under_the_runs_results() -> None:
    # Given a source over three columns, one named like an SQL keyword, and a registered table
    source = _source(["order id", "select", "amount"])
    source.registered["wanted_rows"] = "r_rows_1234"
    # When the statements the summaries run are rendered for Athena
    for statement in (
        sql.row_count(),
        sql.column_stats(["order id", "select", "amount"], numeric=["amount"]),
        sql.value_counts(["order id", "select"]),
        sql.row_groups(["order id", "select", "amount"], dialect="trino"),
        sql.rows_at("wanted_rows"),
    ):
        query, key = source.athena_sql(statement)
        # Then each is an UNLOAD to Parquet under the run's results, keyed by its own text
        assert query.startswith("UNLOAD (WITH ")
        assert f"TO 's3://b/artifacts/alice/d1/r-ABC123/engine/results/{key}/'" in query
        inner = query[len("UNLOAD (") : query.index(") TO 's3://")]
        parsed = sqlglot.parse_one(inner, read="trino")  # Trino reads it back
        assert parsed.find(sqlglot.exp.CTE).alias == "t"
        assert '"r_rows_1234"' in inner if statement.name == "rows_at" else "wanted_rows" not in inner
        assert "HASH(" not in inner.upper().replace("XXHASH64(", "")  # DuckDB's row hash never reaches Athena
    # And the same statement is the same key (a replay finds its result), another a different one
    assert source.athena_sql(sql.row_count())[1] == source.athena_sql(sql.row_count())[1]
    assert source.athena_sql(sql.row_count())[1] != source.athena_sql(sql.value_counts(["select"]))[1]


def test_a_result_not_in_s3_yet_stops_the_round_with_its_statement() -> None:
    source = _source(["a"])
    with pytest.raises(QueryNeeded) as needed:
        source.one(sql.row_count())
    assert needed.value.query == source.athena_sql(sql.row_count())[0]


def test_a_statement_past_athenas_size_limit_fails_the_run_naming_it() -> None:
    columns = [f"column number {i} with a long name" for i in range(700)]
    source = _source(columns)
    with pytest.raises(EngineInputError, match=f"{MAX_STATEMENT_BYTES:,}"):
        source.athena_sql(sql.column_stats(columns))
