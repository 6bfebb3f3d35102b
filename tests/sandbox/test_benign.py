"""Ordinary analysis code must succeed in the sandbox, with the numbers pandas gives outside it."""

from __future__ import annotations

import collections
import decimal
import difflib
import json
import math
import re
import statistics
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from iterate.io import read_parquet_text
from iterate.ports import DatasetRef
from iterate.sandbox import LocalSandbox, SandboxLimits, check_policy

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def frame(dataset: Path) -> pd.DataFrame:
    return read_parquet_text(dataset)


def expected_value_counts(df: pd.DataFrame) -> dict:
    return {str(k): int(v) for k, v in df["city"].value_counts().items()}


def expected_groupby(df: pd.DataFrame) -> dict:
    amounts = pd.to_numeric(df["amount"], errors="coerce")
    return {str(k): float(v) for k, v in amounts.groupby(df["city"]).sum().items()}


def expected_regex(df: pd.DataFrame) -> int:
    return sum(1 for v in df["when"] if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v))


def expected_numeric(df: pd.DataFrame) -> int:
    return int(pd.to_numeric(df["amount"], errors="coerce").isna().sum())


def decimal_total(df: pd.DataFrame) -> decimal.Decimal:
    return sum(
        (decimal.Decimal(v) for v in df["amount"] if v.replace(".", "", 1).isdigit()), decimal.Decimal(0)
    )


BENIGN = {
    "value_counts": (
        "result = {str(k): int(v) for k, v in df['city'].value_counts().items()}",
        expected_value_counts,
    ),
    "groupby_sum": (
        "amounts = pd.to_numeric(df['amount'], errors='coerce')\n"
        "result = {str(k): float(v) for k, v in amounts.groupby(df['city']).sum().items()}",
        expected_groupby,
    ),
    "regex_fullmatch": (
        "import re\n"
        "pattern = re.compile(r'\\d{4}-\\d{2}-\\d{2}')\n"
        "result = {'bad': int(sum(1 for v in df['when'] if not pattern.fullmatch(v)))}",
        lambda df: {"bad": expected_regex(df)},
    ),
    "to_numeric": (
        "result = {'not_numbers': int(pd.to_numeric(df['amount'], errors='coerce').isna().sum())}",
        lambda df: {"not_numbers": expected_numeric(df)},
    ),
    "json_printed": (
        "import json\nprint(json.dumps({'rows': len(df), 'columns': list(df.columns)}))",
        lambda df: {"rows": len(df), "columns": list(df.columns)},
    ),
    "str_accessor_and_mask": (
        "mask = df['city'].str.strip().str.casefold() == 'paris'\n"
        "result = {'affected_rows': int(mask.sum()), 'rows': [int(i) for i in df.index[mask]]}",
        lambda df: {
            "affected_rows": int((df["city"].str.strip().str.casefold() == "paris").sum()),
            "rows": [int(i) for i in df.index[df["city"].str.strip().str.casefold() == "paris"]],
        },
    ),
    "to_datetime": (
        "d = pd.to_datetime(df['when'], format='%Y-%m-%d', errors='coerce')\n"
        "result = {'unparsed': int(d.isna().sum()), 'latest': str(d.max().date())}",
        lambda df: {
            "unparsed": int(pd.to_datetime(df["when"], format="%Y-%m-%d", errors="coerce").isna().sum()),
            "latest": str(pd.to_datetime(df["when"], format="%Y-%m-%d", errors="coerce").max().date()),
        },
    ),
    "duplicated": (
        "result = {'dupes': int(df.duplicated(keep='first').sum())}",
        lambda df: {"dupes": int(df.duplicated(keep="first").sum())},
    ),
    "collections_and_statistics": (
        "import collections, statistics\n"
        "c = collections.Counter(df['note'])\n"
        "lengths = [len(v) for v in df['note']]\n"
        "result = {'top': c.most_common(1)[0][0], 'median_len': statistics.median(lengths)}",
        lambda df: {
            "top": collections.Counter(df["note"]).most_common(1)[0][0],
            "median_len": statistics.median(len(v) for v in df["note"]),
        },
    ),
    "unicodedata_difflib": (
        "import unicodedata, difflib\n"
        "plain = [unicodedata.normalize('NFKD', v).encode('ascii', 'ignore').decode() for v in df['note']]\n"
        "result = {'plain': plain, 'close': difflib.get_close_matches('paris', list(df['city']), n=1)}",
        lambda df: {
            "plain": [
                unicodedata.normalize("NFKD", v).encode("ascii", "ignore").decode() for v in df["note"]
            ],
            "close": difflib.get_close_matches("paris", list(df["city"]), n=1),
        },
    ),
    "itertuples_namedtuple": (
        "result = {'ids': [r.id for r in df.itertuples(index=False)]}",
        lambda df: {"ids": list(df["id"])},
    ),
    "numpy_scalars_converted": (
        "result = {'n': np.int64(len(df)), 'mean_len': np.float64(df['note'].str.len().mean()), 'nan': float('nan')}",
        lambda df: {"n": len(df), "mean_len": float(df["note"].str.len().mean()), "nan": None},
    ),
    "functions_and_comprehensions": (
        "def clean(v):\n    return v.strip().casefold()\n\n"
        "result = {'distinct': sorted({clean(v) for v in df['city']})}",
        lambda df: {"distinct": sorted({v.strip().casefold() for v in df["city"]})},
    ),
    "to_json_without_target": (
        "result = {'head': json.loads(df.head(2).to_json(orient='records'))}",
        lambda df: {"head": json.loads(df.head(2).to_json(orient="records"))},
    ),
    "numpy_stats": (
        "lengths = df['note'].str.len().to_numpy()\n"
        "result = {'p90': float(np.percentile(lengths, 90)), 'unique': np.unique(df['city'].to_numpy()).tolist()}",
        lambda df: {
            "p90": float(__import__("numpy").percentile(df["note"].str.len().to_numpy(), 90)),
            "unique": sorted(set(df["city"])),
        },
    ),
    "large_printed_table": (
        "big = pd.concat([df] * 500, ignore_index=True)\n"
        "text = big.groupby('city').size().to_string() + big.to_string()[:200000]\n"
        "print(json.dumps({'chars': len(text), 'rows': len(big)}))",
        lambda df: {
            "chars": len(
                (big := pd.concat([df] * 500, ignore_index=True)).groupby("city").size().to_string()
                + big.to_string()[:200000]
            ),
            "rows": len(df) * 500,
        },
    ),
    "decimal_and_math": (
        "import decimal, math\n"
        "total = sum(decimal.Decimal(v) for v in df['amount'] if v.replace('.', '', 1).isdigit())\n"
        "result = {'total': str(total), 'log': math.log10(float(total))}",
        lambda df: {"total": str(decimal_total(df)), "log": math.log10(float(decimal_total(df)))},
    ),
}


@pytest.mark.parametrize("name", list(BENIGN))
def test_benign_code_succeeds_with_the_right_numbers(
    name: str, dataset: Path, sandbox: LocalSandbox, frame: pd.DataFrame
) -> None:
    # Given ordinary analysis code that the static policy accepts
    code, expected = BENIGN[name]
    assert check_policy(code) == []
    # When it runs in the sandbox
    outcome = sandbox.run_detailed(code, DatasetRef(path=str(dataset)))
    # Then it succeeds, nothing was refused, and the output equals what pandas computes outside
    result = outcome.investigation
    assert result.success, f"{name}: {result.stopped}: {result.error} {outcome.stderr_tail[-500:]}"
    assert outcome.violations == []
    assert result.output == expected(frame)
    assert result.execution_time_ms is not None and result.execution_time_ms > 0


def test_the_sandbox_sees_the_names_as_written_even_when_they_repeat(
    tmp_path: Path, sandbox: LocalSandbox
) -> None:
    # Given a dataset whose header repeats a name (kept as written by the engine's Parquet writer)
    import pyarrow as pa

    from iterate.io import write_parquet_text
    from iterate.table import SourceInfo, Table

    arrow = pa.table({"a": ["1", "2"], "b": ["x", "y"]})
    table = Table.from_arrow(arrow, name="t", source=SourceInfo(path="t", format="csv"), names=["id", "id"])
    path = write_parquet_text(table, tmp_path / "dup.parquet")
    # When the code lists the columns
    result = sandbox.run(
        "result = {'columns': list(df.columns), 'second': list(df.iloc[:, 1])}", DatasetRef(path=str(path))
    )
    # Then both columns are there under their written name
    assert result.success, result.error
    assert result.output == {"columns": ["id", "id"], "second": ["x", "y"]}


@pytest.mark.parametrize(
    ("code", "stopped"),
    [
        ("x = 1", "invalid_output"),
        ("print('not json')", "invalid_output"),
        ("result = [1, 2]", "invalid_output"),
        ("result = {'when': pd.Timestamp('2024-01-01')}", "invalid_output"),
        ("result = {'x': 1 / 0}", "error"),
        ("result = {'x': df['no such column']}", "error"),
    ],
)
def test_code_that_fails_is_reported_with_the_reason(
    code: str, stopped: str, dataset: Path, sandbox: LocalSandbox
) -> None:
    # Given code that runs but does not produce a JSON object (or raises)
    # When it runs
    result = sandbox.run(code, DatasetRef(path=str(dataset)))
    # Then it is a failure with the matching reason and a message
    assert result.success is False
    assert result.stopped == stopped
    assert result.error


def test_a_syntax_error_is_a_policy_refusal_with_the_line(dataset: Path, sandbox: LocalSandbox) -> None:
    result = sandbox.run("result = {\n", DatasetRef(path=str(dataset)))
    assert result.success is False and result.stopped == "policy"
    assert "line 1" in (result.error or "")


# The same code in the other configurations: namespaces off in a fresh process (as the sandbox Lambda
# runs), and both modes with ITERATE_SANDBOX_INPROCESS_CHECKS=0 (the OS layers alone).
OTHER_MODES = {
    "lambda": {"namespaces": False, "prefork": False},
    "jail-nochecks": {"inprocess_checks": False, "enforce_policy": False},
    "landlock-nochecks": {"namespaces": False, "inprocess_checks": False, "enforce_policy": False},
}


@pytest.fixture(scope="module")
def mode_sandboxes() -> Iterator[dict[str, LocalSandbox]]:
    made = {
        mode: LocalSandbox(SandboxLimits(timeout_s=20, memory_mb=1024, max_output_bytes=100_000, **extra))
        for mode, extra in OTHER_MODES.items()
    }
    yield made
    for sandbox in made.values():
        sandbox.close()


@pytest.mark.parametrize("mode", list(OTHER_MODES))
@pytest.mark.parametrize("name", list(BENIGN))
def test_benign_code_gives_pandas_numbers_in_every_mode(
    name: str, mode: str, dataset: Path, mode_sandboxes: dict[str, LocalSandbox], frame: pd.DataFrame
) -> None:
    code, expected = BENIGN[name]
    outcome = mode_sandboxes[mode].run_detailed(code, DatasetRef(path=str(dataset)))
    result = outcome.investigation
    assert result.success, f"{name} in {mode}: {result.stopped}: {result.error} {outcome.stderr_tail[-500:]}"
    assert outcome.violations == []
    assert result.output == expected(frame)
    assert outcome.supervisor.get("refusals") == [] and not outcome.supervisor.get("leftovers")
