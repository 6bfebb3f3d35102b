"""The engine path end to end: routing, a whole offline run on a sample smaller than the file, and the same
flags as the single pass on dev benchmarks for the issue types whose predicates are exact."""

from __future__ import annotations

import csv
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from iterate.engine.route import routes_to_engine
from iterate.settings import Settings

REPO = Path(__file__).resolve().parents[2]
STUDY = REPO.parent / "shared" / "datasets"


def _settings(**env: str) -> Settings:
    return Settings.from_env({**os.environ, **env})


@pytest.mark.unit
def test_routing_by_size_setting_and_format(tmp_path: Path) -> None:
    small = tmp_path / "a.csv"
    small.write_text("x\n1\n")
    other = tmp_path / "a.parquet"
    other.write_bytes(b"PAR1")
    assert not routes_to_engine(small, _settings())
    assert routes_to_engine(small, _settings(ITERATE_ENGINE_BYTES="4"))
    assert routes_to_engine(small, _settings(ITERATE_ENGINE="always"))
    assert not routes_to_engine(small, _settings(ITERATE_ENGINE="never", ITERATE_ENGINE_BYTES="0"))
    assert not routes_to_engine(other, _settings(ITERATE_ENGINE="always"))  # Parquet keeps the single pass
    assert not routes_to_engine("-", _settings(ITERATE_ENGINE="always"))


CATEGORIES = ["Electronics", "Clothing", "Home & Garden", "Sports", "Toys", "Books", "Beauty", "Grocery"]


def _orders(path: Path, n: int = 6000) -> dict[str, list[int]]:
    """Orders with a -999 placeholder quantity and a day-first date in 3 rows, and 2 exact repeats; what was
    planted, by file row."""
    rng = np.random.default_rng(3)
    planted: dict[str, list[int]] = {"bad": [500, 2500, 5500], "repeat": [4000, 4001]}
    rows = []
    for i in range(n):
        day = f"2023-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 29)):02d}"
        bad = i in planted["bad"]
        rows.append(
            [
                f"ORD-{i:06d}",
                CATEGORIES[int(rng.integers(0, len(CATEGORIES)))],
                "-999" if bad else str(int(rng.integers(1, 9))),
                f"{rng.uniform(5, 50):.2f}",
                f"{day[8:10]}/{day[5:7]}/{day[:4]}" if bad else day,
            ]
        )
    rows[4000] = list(rows[10])
    rows[4001] = list(rows[11])
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["order_id", "category", "quantity", "price", "order_date"])
        w.writerows(rows)
    return planted


@pytest.mark.slow
def test_a_whole_run_on_a_sample_flags_and_counts_every_row(tmp_path: Path) -> None:
    # Given 6,000 rows, a 1,000-row sample, and errors in 3 rows (the sample gets a row for each value it missed)
    from iterate.pipeline import run_local

    src = tmp_path / "orders.csv"
    planted = _orders(src)
    settings = _settings(ITERATE_ENGINE="always", ITERATE_ENGINE_SAMPLE_ROWS="1000")
    # When the offline run takes the engine path
    result = run_local(src, tmp_path / "out", settings=settings)
    # Then the run counts every row and the sample was bounded (plus the rows of values the draw missed)
    assert result.run.rowCount == 6000
    profile = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert profile["rowCount"] == 6000
    category = next(c for c in profile["columns"] if c["name"] == "category")
    top = {v["value"]: v["count"] for v in category["topValues"]}
    with src.open() as fh:
        written = Counter(r["category"] for r in csv.DictReader(fh))
    assert top == dict(written) and category["distinct"] == len(CATEGORIES)
    assert profile["duplicates"]["exactRows"] == 2
    # And each planted error is flagged in exactly the file rows that hold it, found by the engine's predicate
    with (tmp_path / "out" / "flags.csv").open() as fh:
        flags = list(csv.DictReader(fh))
    for column in ("quantity", "order_date"):
        issue = next(i for i in result.issues if i.affectedColumns == [column])
        flagged = sorted(int(r["row"]) for r in flags if r["issue_id"] == issue.id)
        assert flagged == planted["bad"], column
        # And its population count is the engine's, its sample count kept beside it, its proof run and judged
        assert issue.affectedRows == 3 and issue.evidence is not None
        assert issue.evidence.stats["sample_affected_rows"] == 3
        assert issue.evidence.stats["sample_rows"] < 6000
        assert "Over all 6,000 rows: 3 rows (0.1%)" in issue.description
        assert issue.investigation is not None and issue.investigation.success
        assert issue.status == "confirmed"
        # And examples name file rows
        assert {e.row for e in issue.evidence.examples} <= set(planted["bad"])


EXACT_TYPES = {
    "format_violation",
    "inconsistent_category",
    "disguised_missing",
    "merged_columns",
    "mixed_types",
    "unit_in_number",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["adult", "glass", "restaurants", "soccer", "beers"])
def test_same_flags_as_the_single_pass_on_dev_benchmarks(name: str) -> None:
    from iterate.engine.equivalence import compare

    path = STUDY / name / "dirty.csv"
    if not path.exists():
        pytest.skip(f"{path} is not beside the repo")
    # When both paths run on the same file (a sample as large as the file)
    result = compare(path, _settings(ITERATE_ENGINE="always"))
    # Then DuckDB read the same table, so the decision was the same
    assert result.same_detection
    # And every issue of a type whose predicate is exact flags the same cells
    for diff in result.issues:
        if diff.issue_type in EXACT_TYPES:
            assert diff.exact, diff
    # And overall the engine path keeps at least 97% of the single pass's flags
    assert result.common >= 0.97 * result.single


@pytest.mark.unit
@pytest.mark.parametrize(
    ("content", "says"),
    [(b"a,b\n", "has no data rows"), (bytes(range(256)) * 12, "could not be read by the engine path")],
)
def test_a_file_the_engine_cannot_read_says_what_and_what_to_do(
    tmp_path: Path, content: bytes, says: str
) -> None:
    from iterate.engine.step import run_engine
    from iterate.io.errors import DatasetReadError

    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(DatasetReadError) as err:
        run_engine(path, _settings(ITERATE_ENGINE="always"), name="bad")
    assert says in str(err.value) and "bad.csv" in str(err.value)


@pytest.mark.unit
def test_the_engine_path_keeps_the_file_size_limit(tmp_path: Path) -> None:
    from iterate.engine.step import run_engine
    from iterate.io.errors import DatasetReadError

    path = tmp_path / "big.csv"
    path.write_text("a\n" + "1\n" * 100)
    with pytest.raises(DatasetReadError) as err:
        run_engine(path, _settings(ITERATE_ENGINE="always", ITERATE_MAX_FILE_BYTES="50"), name="big")
    assert err.value.limit is not None


@pytest.mark.unit
@pytest.mark.parametrize("engine", [True, False])
def test_the_aws_steps_keep_the_single_pass(tmp_path: Path, engine: bool) -> None:
    # Given ITERATE_ENGINE=always; When profile_step runs as the local run does (engine=True) or as the AWS steps
    # call it (engine=False); Then only the first takes the engine path (no function ships DuckDB yet)
    from iterate.pipeline import STEPS, RunContext, StepRecord, profile_step
    from iterate.storage import get_model
    from iterate.storage.local import LocalArtifactStore

    src = tmp_path / "orders.csv"
    _orders(src)
    store = LocalArtifactStore(tmp_path / "out")
    ctx = RunContext("r", store, None, None, _settings(ITERATE_ENGINE="always"))  # type: ignore[arg-type]
    summary = profile_step(ctx, src, engine=engine)
    assert summary.rowCount == 6000
    record = get_model(store, STEPS.format(step="profile"), StepRecord)
    assert ("engine" in record.detail) is engine
