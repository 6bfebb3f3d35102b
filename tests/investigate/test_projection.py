"""Which columns investigation code reads (iterate.investigate.projection): what it proves, what it refuses,
and that the code's result on the frame of those columns is its result on the whole frame."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest

from iterate.investigate.projection import frame_columns

READS = [
    ("result = {'affected_rows': int((df['email'] == '').sum())}", ("email",)),
    ("s = df[\"phone\"].str.strip()\nresult = {'affected_rows': int((s != df['phone']).sum())}", ("phone",)),
    ("sub = df[['city', 'zip']]\nresult = {'affected_rows': int(sub.duplicated().sum())}", ("city", "zip")),
    (
        "col = 'amount'\nv = pd.to_numeric(df[col], errors='coerce')\nresult = {'affected_rows': int(v.isna().sum())}",
        ("amount",),
    ),
    ("cols = ['city', 'zip']\nresult = {'affected_rows': int(df[cols].duplicated().sum())}", ("city", "zip")),
    (
        "n = 0\nfor c in ['email', 'phone']:\n    n += int((df[c] == '').sum())\nresult = {'affected_rows': n}",
        ("email", "phone"),
    ),
    (
        "cols = ('email', 'phone')\nn = sum(int((df[c] == '').sum()) for c in cols)\nresult = {'affected_rows': n}",
        ("email", "phone"),
    ),
    (
        "m = df['amount'] == ''\nresult = {'affected_rows': int(m.sum()), 'share': float(m.sum()) / len(df)}",
        ("amount",),
    ),
    (
        "m = df.loc[df['city'] == 'Paris', 'zip'] == ''\nresult = {'affected_rows': int(m.sum())}",
        ("city", "zip"),
    ),
    (
        "v = df.loc[:, ['email']]\nresult = {'affected_rows': int((v['email'] == '').sum()), 'n': df.shape[0]}",
        ("email",),
    ),
    ("x = df.at[0, 'email']\nresult = {'affected_rows': int(x == ''), 'first': df.index[0]}", ("email",)),
    ("s = df.get('email')\nresult = {'affected_rows': int((s == '').sum())}", ("email",)),
    ("df['flag'] = df['email'] == ''\nresult = {'affected_rows': int(df['flag'].sum())}", ("email", "flag")),
    ("result = {'affected_rows': len(df)}", ()),
    (
        "bad = df[df['email'].str.strip() == '']\nresult = {'affected_rows': len(bad), 'first': bad.index[:3].tolist()}",
        ("email",),
    ),
    (
        "m = df['zip'].str.match(r'^\\d{5}$') & ~df['city'].isin(['Paris'])\nsub = df.loc[m]\n"
        "result = {'affected_rows': int(len(sub)), 'zips': sub['zip'].head(3).tolist()}",
        ("zip", "city"),
    ),
    ("result = {'affected_rows': len(df[(df['amount'] == '') | df['notes'].isna()])}", ("amount", "notes")),
    (
        "d = df\nm = d['email'] == ''\nresult = {'affected_rows': int(d[m]['phone'].str.len().sum())}",
        ("email", "phone"),
    ),
    ("rows = df.loc[df['city'] == '']\nresult = {'affected_rows': len(rows)}", ("city",)),
    (
        "col = 'email'\nif col not in df.columns:\n    raise KeyError(col)\n"
        "result = {'affected_rows': int((df[col] == '').sum())}",
        ("email",),
    ),
    (
        "result = {'affected_rows': int('phone' in df.columns) + int('absent' in df.columns)}",
        ("phone", "absent"),
    ),
    (
        "name: str = 'zip'\ndef count(s):\n    return int((s == '').sum())\nresult = {'affected_rows': count(df[name])}",
        ("zip",),
    ),
]

WHOLE = [
    "result = {'affected_rows': int((df == '').any(axis=1).sum())}",
    "result = {'affected_rows': int(df.duplicated().sum())}",
    "result = {'affected_rows': len(df.columns)}",
    "result = {'affected_rows': df.shape[1]}",
    "result = {'affected_rows': int('email' in df)}",
    "for c in df:\n    pass\nresult = {'affected_rows': 0}",
    "for c in df.columns:\n    pass\nresult = {'affected_rows': 0}",
    "result = {'affected_rows': int(df.iloc[:, 0].eq('').sum())}",
    "df = df[df['email'] != '']\nresult = {'affected_rows': len(df)}",
    "del df['email']\nresult = {'affected_rows': 0}",
    "c = 'em' + 'ail'\nresult = {'affected_rows': int((df[c] == '').sum())}",
    "c = f'{\"email\"}'\nresult = {'affected_rows': int((df[c] == '').sum())}",
    "def f(col):\n    return int((df[col] == '').sum())\nresult = {'affected_rows': f('email')}",
    "c = 'email'\nc = input_name\nresult = {'affected_rows': int((df[c] == '').sum())}",
    "cols = ['email']\ncols.append('phone')\nresult = {'affected_rows': int((df[cols] == '').sum().sum())}",
    "cols = ['email']\nother = cols\nresult = {'affected_rows': int((df[cols] == '').sum().sum())}",
    "for c in 'email':\n    df[c]\nresult = {'affected_rows': 0}",
    "result = {'affected_rows': len(globals()['df'].columns)}",
    "result = {'affected_rows': int(pd.eval('df.shape[1]'))}",
    "result = {'affected_rows': len(df.query('email == \"\"'))}",
    "result = {'affected_rows': len(df.__dict__)}",
    "result = {'affected_rows': summarize(df)}",
    "import json as c\nresult = {'affected_rows': int((df[c] == '').sum())}",
    "try:\n    pass\nexcept Exception as c:\n    pass\nc = 'email'\nresult = {'affected_rows': int((df[c] == '').sum())}",
    "(c := 'email')\nresult = {'affected_rows': int((df[c] == '').sum())}",
    "result = {'affected_rows': len(df.loc[0])}",
    "x = [df]\nresult = {'affected_rows': 0}",
    "def g(df):\n    return df\nresult = {'affected_rows': 0}",
    "not python (",
    "bad = df[df['email'] == '']\nresult = {'affected_rows': len(bad), 'rows': bad.head().to_dict()}",
    "bad = df[df['email'] == '']\nbad = bad[bad['phone'] == '']\nresult = {'affected_rows': len(bad)}",
    "result = {'affected_rows': len(df[['email'] + ['phone']])}",
    "key = df['city']\nresult = {'affected_rows': len(df[key])}",
    "m = df['email'] == ''\nresult = {'affected_rows': len(df.loc[m].columns)}",
    "a, b = df[df['email'] == ''], 0\nresult = {'affected_rows': len(a)}",
    "result = {'affected_rows': int(df.columns[0] in df.columns)}",
    "result = {'affected_rows': int(['email'] == df.columns)}",
    "result = {'affected_rows': int('email' in df.columns.tolist())}",
]


@pytest.mark.parametrize(("code", "columns"), READS)
def test_code_that_names_its_columns_reads_only_those(code: str, columns: tuple[str, ...]) -> None:
    found = frame_columns(code)
    assert found is not None and sorted(found) == sorted(columns) and len(set(found)) == len(found)


@pytest.mark.parametrize("code", WHOLE)
def test_code_that_may_read_other_columns_gets_the_whole_frame(code: str) -> None:
    assert frame_columns(code) is None


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 400
    return pd.DataFrame(
        {
            "email": rng.choice(["a@x.org", "", "b@y.com", "N/A"], n),
            "phone": rng.choice(["555-0100", " 555-0101", "", "5550102"], n),
            "city": rng.choice(["Paris", "Lyon", ""], n),
            "zip": rng.choice(["75001", "69001", "", "7500"], n),
            "amount": rng.choice(["1.5", "", "abc", "20"], n),
            "notes": rng.choice(["", "call back"], n),
        }
    ).astype("str")


def _run(code: str, frame: pd.DataFrame) -> Any:
    namespace: dict[str, Any] = {"df": frame.copy(), "pd": pd, "np": np, "json": json}
    exec(compile(code, "<investigation>", "exec"), namespace)
    return namespace["result"]


@pytest.mark.parametrize(("code", "columns"), READS)
def test_the_result_on_the_columns_read_is_the_result_on_the_whole_frame(
    code: str, columns: tuple[str, ...]
) -> None:
    frame = _frame()
    whole = _run(code, frame)
    # The sandbox picks the named columns that exist (iterate.sandbox.frames.select_columns), in file order
    picked = [c for c in frame.columns if c in columns]
    narrowed = frame[picked] if picked else frame
    assert _run(code, narrowed) == whole


def test_a_column_the_data_lacks_fails_the_same_way_either_way() -> None:
    code = "result = {'affected_rows': int((df['missing'] == '').sum())}"
    assert frame_columns(code) == ("missing",)
    with pytest.raises(KeyError):
        _run(code, _frame())
    with pytest.raises(KeyError):
        _run(code, _frame()[["email"]])


class _Recording:
    """The real local sandbox, recording which columns each run was asked to load."""

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox
        self.columns: list[tuple[str, ...] | None] = []

    def run(self, code: str, data: Any, *, timeout_s: float | None = None) -> Any:
        self.columns.append(data.columns)
        return self.sandbox.run(code, data, timeout_s=timeout_s)


@pytest.mark.parametrize(
    ("code", "loads"),
    [
        (
            "m = df['email'] == ''\nresult = {'affected_rows': int(m.sum()), 'share': float(m.sum()) / len(df)}",
            ("email",),
        ),
        ("m = (df == '').any(axis=1)\nresult = {'affected_rows': int(m.sum())}", None),
    ],
)
def test_the_loop_sends_model_code_with_the_columns_it_reads(tmp_path: Any, code: str, loads: Any) -> None:
    from iterate.contracts import DatasetProfile, DuplicateStats, Issue
    from iterate.investigate import investigate_issue
    from iterate.io import read_table, write_parquet_text
    from iterate.ports import DatasetRef
    from iterate.sandbox import LocalSandbox, SandboxLimits

    csv = tmp_path / "t.csv"
    _frame().to_csv(csv, index=False)
    data = DatasetRef(path=str(write_parquet_text(read_table(csv), tmp_path / "data.parquet")))

    class Model:
        source = "llm"

        def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[Any]) -> str:
            return code

    issue = Issue(
        id="h1",
        type="missing_values",
        severity="low",
        description="d",
        affectedColumns=["email"],
        suggestedAction="s",
        category="quick_fixes",
        source="llm",
        status="hypothesis",
    )
    profile = DatasetProfile(
        name="t",
        rowCount=400,
        columnCount=6,
        contentHash="h",
        nullMarker="",
        columns=[],
        duplicates=DuplicateStats(exactRows=0, exactGroups=0, nearRows=0),
    )
    with LocalSandbox(SandboxLimits(timeout_s=20)) as sandbox:
        recording = _Recording(sandbox)
        result = investigate_issue(issue, agent=Model(), sandbox=recording, data=data, profile=profile)
    # The run loads what the code reads, and its numbers are those of the code on the whole frame
    assert recording.columns == [loads]
    assert result.success, result.error
    assert (
        result.output is not None and result.output["affected_rows"] == _run(code, _frame())["affected_rows"]
    )
