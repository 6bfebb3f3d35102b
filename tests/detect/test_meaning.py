"""Values keyed by what they say: an entity's rows agree across spellings, and only a different value breaks it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from iterate.detect.context import ColumnFacts, facts_for
from iterate.detect.dependencies import detect_dependency_violations
from iterate.table import Column, SourceInfo, Table

pytestmark = pytest.mark.unit


def keys(values: list[str]) -> list[int]:
    return ColumnFacts(Column("x", 0, pa.array(values)), "").meaning.codes.tolist()


def test_spellings_of_one_value_share_a_key_and_other_values_do_not() -> None:
    got = keys(["7:10 a.m.", "7:10am", "07:10", "7:10 AM", "19:10", "7:10 p.m.", "7:11 a.m."])
    assert got[0] == got[1] == got[2] == got[3]
    assert got[4] == got[5] != got[0]
    assert got[6] not in (got[0], got[4])


def test_numbers_agree_however_written_but_codes_keep_their_zeros() -> None:
    got = keys(["6.0", "6", "6.00", "06", "1e3", "1000", "7"])
    assert got[0] == got[1] == got[2]
    assert got[3] != got[0]  # 06 is a code, not the number 6
    assert got[4] == got[5]
    assert got[6] != got[0]


def test_case_spacing_and_missing() -> None:
    got = keys(["New  York", "new york ", "Boston", "", "N/A"])
    assert got[0] == got[1] != got[2]
    assert got[3] == got[4] == -1


def test_a_date_before_a_time_is_a_way_of_writing_when_most_times_have_none() -> None:
    got = keys(["7:10 a.m."] * 5 + ["Dec 1 7:10 a.m.", "Dec 1 8:10 a.m."])
    assert got[5] == got[0] != got[6]
    dated = keys([f"2024-01-0{d} 07:10" for d in range(1, 8)])
    assert len(set(dated)) == 7  # datetimes: the date is part of the value


def test_sources_that_write_times_differently_agree_and_only_a_wrong_time_is_listed() -> None:
    # Given flights reported by several sources, each writing times its own way, one source wrong once
    rng = np.random.default_rng(1)
    flights, times, written = [], [], []
    styles = ["{h}:{m:02d} a.m.", "{h}:{m:02d}am", "0{h}:{m:02d}"]
    for f in range(40):
        h, m = int(rng.integers(1, 10)), int(rng.integers(0, 60))
        for s in range(9):
            flights.append(f"F{f}")
            written.append(styles[s % 3].format(h=h, m=m))
            times.append((h, m))
    written[4] = "9:59 a.m." if times[4] != (9, 59) else "1:01 a.m."
    table = Table.from_arrow(
        pa.table({"flight": flights, "dep": written}), name="t", source=SourceInfo(path="t.csv", format="csv")
    )
    findings, deps, _ = detect_dependency_violations(facts_for(table, ""), table.n_rows)
    listed = {int(r) for f in findings if f.columns == ["dep"] for r in f.rows}
    # Then the flight determines the time, and only the wrong time breaks it
    assert any(d.lhs == 0 and d.rhs == 1 for d in deps)
    assert listed == {4}


def test_an_identity_answers_as_the_arange_it_stands_for() -> None:
    import numpy as np
    import pytest

    from iterate.detect.context import Identity

    identity, arange = Identity(5), np.arange(5)
    for keys in (np.array([0, 3, 4, 3], dtype=np.int32), [1, -1], 2, np.array([], dtype=np.int64)):
        got, want = identity[keys], arange[keys]
        assert np.array_equal(got, want) and got.dtype == want.dtype
    assert int(identity[np.int64(4)]) == 4 and len(identity) == 5
    for bad in (5, [0, 7], -6):
        with pytest.raises(IndexError):
            identity[bad]
    keys = np.array([1, 2])
    picked = identity[keys]
    picked[0] = 9  # a copy, as fancy indexing gives: the caller's keys are untouched
    assert keys.tolist() == [1, 2]
