"""Loading only the columns an investigation names: same answers, the other columns never read."""

from __future__ import annotations

import json

import pytest

from iterate.contracts import Evidence, Issue
from iterate.investigate.loop import needed_columns
from iterate.ports import DatasetRef

pytestmark = pytest.mark.unit


def test_a_narrowed_dataset_holds_only_the_named_columns(sandbox, dataset):
    # Given the dataset narrowed to one of its columns
    code = "result = {'columns': list(df.columns), 'rows': len(df)}"
    full = sandbox.run(code, DatasetRef(path=str(dataset)))
    narrow = sandbox.run(code, DatasetRef(path=str(dataset), columns=(full.output["columns"][1],)))
    # Then the code sees that column alone, with every row
    assert full.success and narrow.success
    assert narrow.output == {"columns": [full.output["columns"][1]], "rows": full.output["rows"]}


def test_an_issue_names_the_columns_its_template_reads():
    issue = Issue(
        id="fd-city",
        type="dependency_violation",
        severity="low",
        description="d",
        affectedColumns=["city"],
        suggestedAction="a",
        category="smart_fixes",
        evidence=Evidence(
            affectedCells=1,
            affectedRows=1,
            affectedShare=0.1,
            stats={
                "rhs": "city",
                "determinants": ["zip", "store"],
                "derivation": {"left": "a", "right": "b"},
            },
        ),
    )
    assert needed_columns(issue) == ("city", "zip", "store", "a", "b")
    dup = issue.model_copy(update={"type": "duplicate_rows"})
    assert needed_columns(dup) is None


ON_DEMAND = "# iterate: columns read on demand\n"


def _duplicate_rows_issue(columns: list[str]) -> Issue:
    return Issue(
        id="duplicates-exact",
        type="duplicate_rows",
        severity="low",
        description="d",
        affectedColumns=columns,
        suggestedAction="a",
        category="quick_fixes",
        evidence=Evidence(affectedCells=5, affectedRows=1, affectedShare=0.1, stats={"columns": columns}),
    )


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "as on Lambda"])
def test_whole_row_templates_read_their_columns_on_demand_with_the_same_answers(dataset, namespaces: bool):
    from iterate.agents.offline.investigation import template_code
    from iterate.sandbox import LocalSandbox, SandboxLimits

    # Given the duplicate-rows template (it reads every column, one at a time) and the same code without the
    # line that asks for columns on demand
    names = ["id", "city", "amount", "when", "note"]
    code = template_code(_duplicate_rows_issue(names))
    assert ON_DEMAND in code
    whole = code.replace(ON_DEMAND, "")
    probe = "result = {'frame': isinstance(df, pd.DataFrame), 'rows': len(df), 'shape': list(df.shape), "
    probe += (
        "'cols': list(df.columns), 'head': df.iloc[:3, 1].tolist(), 'picked': df.iloc[[6, 0], 2].tolist()}"
    )
    with LocalSandbox(SandboxLimits(timeout_s=20, namespaces=namespaces, prefork=False)) as sandbox:
        data = DatasetRef(path=str(dataset))
        # When both run on the whole dataset
        lazy, loaded = sandbox.run(code, data), sandbox.run(whole, data)
        # Then they give the same verdict, the rows of ids 4 and 4 found as one copy
        assert lazy.success and loaded.success, (lazy.error, loaded.error)
        assert lazy.output == loaded.output and lazy.output["affected_rows"] == 1
        # And what the code sees of the data is a reader, column by column as the frame holds them
        seen, frame = sandbox.run(ON_DEMAND + probe, data), sandbox.run(probe, data)
        assert seen.success and frame.success, (seen.error, frame.error)
        assert seen.output["frame"] is False and frame.output["frame"] is True
        assert {k: v for k, v in seen.output.items() if k != "frame"} == {
            k: v for k, v in frame.output.items() if k != "frame"
        }
        # And a narrowed dataset (a template naming its columns) is loaded as before, never on demand
        narrowed = sandbox.run(
            ON_DEMAND + probe, DatasetRef(path=str(dataset), columns=("id", "city", "amount"))
        )
        assert narrowed.output["frame"] is True


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "as on Lambda"])
def test_code_reading_on_demand_cannot_write_the_dataset_or_reach_the_file_another_way(
    dataset, tmp_path, namespaces: bool
):
    import shutil

    from iterate.sandbox import LocalSandbox, SandboxLimits

    copy = tmp_path / "data.parquet"
    shutil.copy(dataset, copy)
    before = copy.read_bytes()
    attempts = [
        "df._handle.write(b'x')",  # the reader's file is opened read-only
        "df._handle.seek(0)\nresult = {'affected_rows': len(df._handle.read())}\ndf._handle.truncate(0)",
        "import os\nos.write(df._handle.fileno(), b'x')",
    ]
    # With the static policy and the in-process checks off (they refuse private attributes and os), what
    # holds is the descriptor's read-only mode
    limits = SandboxLimits(
        timeout_s=20, namespaces=namespaces, prefork=False, inprocess_checks=False, enforce_policy=False
    )
    with LocalSandbox(limits) as sandbox:
        for attempt in attempts:
            run = sandbox.run(ON_DEMAND + attempt, DatasetRef(path=str(copy)))
            assert not run.success, attempt
            assert "UnsupportedOperation" in (run.error or "") or "Bad file descriptor" in (run.error or "")
    assert copy.read_bytes() == before


def test_a_name_or_value_cannot_ask_for_columns_on_demand():
    from iterate.agents.offline.investigation import template_code
    from iterate.sandbox.frames import reads_on_demand

    # Given a column whose name holds the line itself, in a template that reads a frame
    name = "x\n# iterate: columns read on demand\ny"
    issue = Issue(
        id="whitespace-x",
        type="stray_whitespace",
        severity="low",
        description="d",
        affectedColumns=[name],
        suggestedAction="a",
        category="quick_fixes",
        evidence=Evidence(
            affectedCells=1, affectedRows=1, affectedShare=0.1, stats={"column": name, "bad_values": [name]}
        ),
    )
    # Then the code does not ask for it: the name sits escaped inside one literal
    assert not reads_on_demand(template_code(issue))
    assert reads_on_demand(template_code(_duplicate_rows_issue([name, "b"])))


def test_a_file_whose_columns_cannot_be_read_one_by_one_is_loaded_as_a_frame_instead(sandbox, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Given a Parquet file (not the engine's) with one stored name twice: its columns cannot be picked by name
    path = tmp_path / "repeated.parquet"
    pq.write_table(pa.table([["a", "a", "b"], ["x", "x", "y"]], names=["k", "k"]), path)
    probe = "result = {'frame': isinstance(df, pd.DataFrame), 'rows': len(df), 'cols': list(df.columns)}"
    # When code that asks for columns on demand runs on it
    run = sandbox.run(ON_DEMAND + probe, DatasetRef(path=str(path)))
    # Then it gets the frame, as code that does not ask would
    assert run.success, run.error
    assert run.output == {"frame": True, "rows": 3, "cols": ["k", "k"]}


def test_the_column_reader_factorizes_from_dictionary_pages_exactly_as_pandas_does_from_text(tmp_path):
    import os

    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from iterate.sandbox.frames import ColumnReader

    # Given a file of three row groups: a column of few values (stored as dictionary indices), one of values
    # nearly all distinct (the writer falls back to plain values), one of few values with blanks and nulls
    rng = np.random.default_rng(5)
    n = 30_000
    few = rng.choice(["b", "a", "", "c ", "é", "10"], size=n).tolist()
    many = [f"value-{i}-{'x' * (i % 7)}" for i in rng.permutation(n)]
    gaps = [None if i % 11 == 0 else v for i, v in enumerate(few)]
    path = tmp_path / "data.parquet"
    # (`not null` where there is none, as the engine writes data.parquet: a nullable column is read as text)
    schema = pa.schema(
        [
            pa.field("few", pa.string(), False),
            pa.field("many", pa.string(), False),
            pa.field("gaps", pa.string()),
        ]
    )
    table = pa.table({"few": few, "many": many, "gaps": gaps}, schema=schema)
    pq.write_table(table, path, row_group_size=10_000, dictionary_pagesize_limit=64 * 1024)
    reader = ColumnReader.open(os.open(path, os.O_RDONLY))
    assert reader is not None
    # Then the column of few values is read from its dictionary pages, the other as text
    assert [reader._dictionary_encoded(i) for i in range(3)] == [True, False, True]
    picks = [
        slice(None),
        np.arange(n)[::7],
        rng.permutation(n)[:500],  # in no order, as a filtered key's rows are not
        np.array([], dtype=np.int64),
        np.array([n - 1, 0, n - 1]),
    ]
    for position in range(3):
        for rows in picks:
            # And each gives pandas' codes and distinct values, in the same order, as the text would
            codes, uniques = reader.factorized(position, rows)
            expected_codes, expected = pd.factorize(
                reader.column(position, rows).astype(str), use_na_sentinel=False
            )
            assert np.array_equal(codes, expected_codes), (position, rows)
            assert list(uniques) == list(expected), (position, rows)


@pytest.mark.parametrize("kind", ["duplicate_rows", "near_duplicate_rows"])
def test_whole_row_proofs_find_the_same_rows_on_a_file_with_several_row_groups(tmp_path, kind: str):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from iterate.agents.offline.investigation import template_code
    from iterate.io.parquet_text import NAMES_KEY
    from iterate.sandbox import LocalSandbox, SandboxLimits

    # Given 40,000 rows in four row groups with copies and near-copies (case, punctuation) across groups
    rng = np.random.default_rng(9)
    n = 40_000
    names = ["status", "city", "ref", "note"]
    columns = {
        "status": rng.choice(["open", "Open", "closed", ""], size=n).tolist(),
        "city": rng.choice(["Paris", "paris!", "Lyon", "Nice"], size=n).tolist(),
        "ref": [f"r{i % 39_000}" for i in range(n)],  # 1,000 refs twice, far apart
        "note": rng.choice(["a", "b", "c"], size=n).tolist(),
    }
    schema = pa.schema([pa.field(name, pa.string(), False) for name in names])  # as the engine writes it
    table = pa.table(columns, schema=schema).replace_schema_metadata({NAMES_KEY: json.dumps(names).encode()})
    path = tmp_path / "data.parquet"
    pq.write_table(table, path, row_group_size=10_000)
    issue = _duplicate_rows_issue(names).model_copy(update={"type": kind, "id": f"{kind}-x"})
    code = template_code(issue)
    assert ON_DEMAND in code
    with LocalSandbox(SandboxLimits(timeout_s=30, prefork=False)) as sandbox:
        data = DatasetRef(path=str(path))
        # When the proof reads its columns on demand (codes from dictionary pages) and from a loaded frame
        lazy, loaded = sandbox.run(code, data), sandbox.run(code.replace(ON_DEMAND, ""), data)
    # Then both find the same rows, with the same examples
    assert lazy.success and loaded.success, (lazy.error, loaded.error)
    assert lazy.output == loaded.output
    assert lazy.output["affected_rows"] > 0
