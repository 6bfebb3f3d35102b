"""flags.csv: header, order, quoting, formula neutralising, duplicates, and speed on millions of flags."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from iterate.report import FlagArrays, neutralise, write_flags_csv

pytestmark = pytest.mark.unit


def read_back(text: str) -> pd.DataFrame:
    # exactly how the scorer reads the file
    return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)


def test_lines_are_sorted_by_row_then_header_position_and_duplicates_dropped():
    # Given flags in no particular order, one repeated, and a header where "b" comes before "a"
    flags = [(3, "a", "i1"), (0, "a", "i2"), (3, "b", "i1"), (0, "a", "i2"), (3, "a", "i0")]
    buf = io.StringIO()
    # When they are written
    n = write_flags_csv(flags, buf, columns=["b", "a"])
    # Then the header is exact and the lines follow row, then the column's position in the header
    text = buf.getvalue()
    assert text.splitlines()[0] == "row,column,issue_id,score"
    got = read_back(text)
    assert n == 4 == len(got)
    assert list(zip(got.row, got.column, got.issue_id, strict=True)) == [
        ("0", "a", "i2"),
        ("3", "b", "i1"),
        ("3", "a", "i1"),
        ("3", "a", "i0"),
    ]


def test_awkward_column_names_round_trip_exactly():
    # Given column names with commas, quotes, newlines, spaces and non-ASCII text
    names = ["city, state", 'say "hi"', "two\nlines", " padded ", "prix (€)"]
    flags = [(i, name, "issue-1") for i, name in enumerate(names)]
    buf = io.StringIO()
    write_flags_csv(flags, buf, columns=names)
    # Then a CSV reader gets every name back unchanged
    assert read_back(buf.getvalue()).column.tolist() == names


@pytest.mark.parametrize("name", ["=SUM(A1)", "+1", "-x", "@cmd", "\tTAB", "\rCR"])
def test_formula_like_names_are_neutralised(name):
    buf = io.StringIO()
    write_flags_csv([(0, name, name)], buf)
    got = read_back(buf.getvalue())
    assert got.column[0] == "'" + name and got.issue_id[0] == "'" + name


def test_plain_names_are_written_unchanged():
    # the scorer matches column names exactly, so only formula-like names may change
    for name in ("price", "a=b", "total-", "e-mail", "x@y", "'quoted"):
        assert neutralise(name) == name


def test_every_input_shape_gives_the_same_file():
    rows = np.array([2, 0, 1, 0])
    cols = np.array(["b", "a", "b", "b"], dtype=object)
    ids = np.array(["x", "y", "x", "x"], dtype=object)
    shapes = [
        list(zip(rows.tolist(), cols, ids, strict=True)),
        FlagArrays(rows, cols, ids),
        {"row": rows, "column": cols, "issue_id": ids},
        pa.table({"row": rows, "column": pa.array(cols).dictionary_encode(), "issue_id": ids}),
        pd.DataFrame({"row": rows, "column": cols, "issue_id": ids}),
    ]
    outputs = set()
    for shape in shapes:
        buf = io.BytesIO()  # binary streams work too
        write_flags_csv(shape, buf, columns=["a", "b"])
        outputs.add(buf.getvalue())
    assert outputs == {b"row,column,issue_id,score\n0,a,y,1.0000\n0,b,x,1.0000\n1,b,x,1.0000\n2,b,x,1.0000\n"}


def test_each_cell_carries_its_score_through_sorting_and_deduplication():
    # Given flags out of order with their scores, one line repeated
    flags = FlagArrays(
        np.array([5, 1, 5, 1]),
        np.array(["a", "b", "b", "b"], dtype=object),
        np.array(["i", "j", "i", "j"], dtype=object),
        np.array([0.61234, 0.5, 0.99999, 0.5]),
    )
    buf = io.StringIO()
    write_flags_csv(flags, buf, columns=["a", "b"])
    # Then every line keeps its own cell's score, rounded to 4 decimals
    assert buf.getvalue().splitlines() == [
        "row,column,issue_id,score",
        "1,b,j,0.5000",
        "5,a,i,0.6123",
        "5,b,i,1.0000",
    ]


@pytest.mark.parametrize("bad", [[1.5], [-0.1], [float("nan")]])
def test_scores_outside_0_to_1_are_refused(bad):
    flags = FlagArrays(
        np.array([0]), np.array(["a"], dtype=object), np.array(["i"], dtype=object), np.array(bad)
    )
    with pytest.raises(ValueError, match="0-1"):
        write_flags_csv(flags, io.StringIO())


def test_no_flags_still_writes_the_header(tmp_path):
    path = tmp_path / "flags.csv"
    assert write_flags_csv([], path) == 0
    assert path.read_text() == "row,column,issue_id,score\n"


def test_negative_rows_are_refused():
    with pytest.raises(ValueError, match="negative"):
        write_flags_csv([(-1, "a", "x")], io.StringIO())


@pytest.mark.slow
def test_three_million_flags_are_written_sorted_and_complete(tmp_path):
    # Given 3M flags over a million rows, as arrays (what the detectors produce); how long writing them takes
    # is measured by `make bench` (scripts/bench.py, flags_writing), not asserted here
    rng = np.random.default_rng(0)
    n = 3_000_000
    header = [f"c{i}" for i in range(40)]
    flags = pa.table(
        {
            "row": rng.integers(0, 1_000_000, n),
            "column": pa.DictionaryArray.from_arrays(rng.integers(0, 40, n).astype(np.int32), header),
            "issue_id": pa.DictionaryArray.from_arrays(
                rng.integers(0, 25, n).astype(np.int32), [f"issue-{k}" for k in range(25)]
            ),
        }
    )
    path = tmp_path / "flags.csv"
    # When they are written
    written = write_flags_csv(flags, path, columns=header)
    # Then the file is sorted and complete
    back = pd.read_csv(path)
    assert len(back) == written
    assert back.row.is_monotonic_increasing
    expected = len(flags.to_pandas().astype(str).drop_duplicates())
    assert written == expected


# What a hostile header name carries: clear screen, a colour, BEL, DEL, an 8-bit CSI, a right-to-left
# override, an isolate, a line separator.
HOSTILE = "a\x1b[2J\x1b[31mb\x07c\x7fd\x9b2Je\u202ef\u2066g\u2028h"
HOSTILE_SHOWN = "a\\x1b[2J\\x1b[31mb\\x07c\\x7fd\\x9b2Je\\u202ef\\u2066g\\u2028h"


def test_control_characters_in_names_and_ids_are_written_escaped():
    # Given flags on a hostile column, by a hostile issue id, beside a plain column
    flags = [(0, HOSTILE, f"id{HOSTILE}"), (1, "amount", "issue-1")]
    buf = io.StringIO()
    write_flags_csv(flags, buf, columns=[HOSTILE, "amount"])
    text = buf.getvalue()
    # Then the file carries no raw control character, the names read back escaped, the plain one exact
    assert not [
        c for c in text if (c < " " and c != "\n") or "\x7f" <= c <= "\x9f" or c in "\u202e\u2066\u2028"
    ]
    got = read_back(text)
    assert got.column.tolist() == [HOSTILE_SHOWN, "amount"]
    assert got.issue_id.tolist() == [f"id{HOSTILE_SHOWN}", "issue-1"]


def test_tab_newline_and_carriage_return_inside_names_stay_exact_in_quotes():
    # Decided: TAB, LF and CR are CSV's own syntax inside a quoted field, and headers really hold them
    # (Excel's Alt+Enter), so a CSV reader must get the name back exactly; only a leading TAB or CR is
    # neutralised against formulas.
    names = ["order\ndate", "a\tb", "x\r\ny"]
    buf = io.StringIO()
    write_flags_csv([(i, n, "i") for i, n in enumerate(names)], buf, columns=names)
    assert read_back(buf.getvalue()).column.tolist() == names
    assert '"order\ndate"' in buf.getvalue()


def test_plain_names_are_byte_identical_to_the_header():
    names = ["amount", "prix (€)", "名前", "C:\\x1b\\path", "👩\u200d💻"]  # a backslash is not escaped
    buf = io.BytesIO()
    write_flags_csv([(0, n, "i") for n in names], buf, columns=names)
    body = buf.getvalue().decode("utf-8").splitlines()[1:]
    assert [line.split(",")[1] for line in body] == names
