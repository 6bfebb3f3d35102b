"""Date and number conventions: a column written consistently in one is left alone, a minority in another is
flagged (compact dates, 12-hour clocks, decimal commas), and the finding's rule recounts what was flagged."""

from __future__ import annotations

import random
import re

import pytest

from iterate.detect import detect
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit

N = 300


def make_table(columns: dict[str, list[str]]) -> Table:
    import pyarrow as pa

    names = list(columns)
    arrow = pa.table({f"c{i}": pa.array(v, pa.string()) for i, v in enumerate(columns.values())})
    return Table.from_arrow(arrow, name="t", source=SourceInfo(path="t.csv", format="csv"), names=names)


def iso(n: int, rng: random.Random) -> list[str]:
    return [
        f"20{rng.randrange(10, 24)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}" for _ in range(n)
    ]


def clock12(n: int, rng: random.Random, marker: tuple[str, str] = ("AM", "PM")) -> list[str]:
    return [f"{rng.randrange(1, 13)}:{rng.randrange(60):02d} {rng.choice(marker)}" for _ in range(n)]


def clock24(n: int, rng: random.Random) -> list[str]:
    return [f"{rng.randrange(13, 24)}:{rng.randrange(60):02d}" for _ in range(n)]


def stamp12(n: int, rng: random.Random) -> list[str]:
    return [
        f"{rng.randrange(1, 13):02d}/{rng.randrange(1, 29):02d}/2011 {rng.randrange(1, 13):02d}:"
        f"{rng.randrange(60):02d} {rng.choice(['AM', 'PM'])}"
        for _ in range(n)
    ]


def points(n: int, rng: random.Random) -> list[str]:
    return [f"{rng.uniform(0, 50):.2f}" for _ in range(n)]


def commas(n: int, rng: random.Random) -> list[str]:
    return [v.replace(".", ",") for v in points(n, rng)]


def euro_thousands(n: int, rng: random.Random) -> list[str]:
    return [f"{rng.uniform(0, 99999):,.2f}".translate(str.maketrans(",.", ".,")) for _ in range(n)]


def shuffled(values: list[str], rng: random.Random) -> list[str]:
    rng.shuffle(values)
    return values


def consistent_columns() -> dict[str, list[str]]:
    rng = random.Random(1)
    return {
        "created": [d.replace("-", "") for d in iso(N, rng)],
        "order_id": [str(rng.randrange(10_000_000, 99_999_999)) for _ in range(N)],
        "at": clock12(N, rng),
        "at_dots": clock12(N, rng, ("a.m.", "p.m.")),
        "stamp": stamp12(N, rng),
        "price": commas(N, rng),
        "amount": euro_thousands(N, rng),
        "count": [str(rng.randrange(0, 40)) for _ in range(N - 40)] + ["12,5", "3,25"] * 20,
    }


def test_columns_written_consistently_in_one_convention_are_not_flagged():
    table = make_table(consistent_columns())
    flagged = {table.column_names[int(c)] for f in detect(table).findings if f.flag for c in f.cols}
    assert flagged == set()


def mixed_columns() -> tuple[dict[str, list[str]], dict[str, set[str]]]:
    """Columns mostly in one convention with a minority in another, and the minority values."""
    rng = random.Random(2)
    minority = {
        "created": [d.replace("-", "") for d in iso(15, rng)],
        "at": clock24(20, rng),
        "stamp": [f"2011-0{rng.randrange(1, 10)}-1{rng.randrange(0, 10)} 1{rng.randrange(3, 10)}:15:00" for _ in range(20)],
        "price": points(30, rng),  # 10%: more than a rare shape
        "weight": commas(30, rng),
    }  # fmt: skip
    columns = {
        "created": iso(N - 15, rng) + minority["created"],
        "at": clock12(N - 20, rng) + minority["at"],
        "stamp": stamp12(N - 20, rng) + minority["stamp"],
        "price": commas(N - 30, rng) + minority["price"],
        "weight": points(N - 30, rng) + minority["weight"],
    }
    for name in columns:
        columns[name] = shuffled(columns[name], rng)
    return columns, {k: set(v) for k, v in minority.items()}


def test_a_minority_in_another_convention_is_flagged_and_the_rule_recounts_it():
    columns, minority = mixed_columns()
    table = make_table(columns)
    findings = [f for f in detect(table).findings if f.flag]
    by_column: dict[str, set[str]] = {}
    for f in findings:
        for r, c in zip(f.rows, f.cols, strict=True):
            name = table.column_names[int(c)]
            by_column.setdefault(name, set()).add(columns[name][int(r)])
    assert by_column == minority
    for f in findings:
        assert f.type == "format_violation"
        name = f.stats["column"]
        if "expected_regex" in f.stats:  # the investigation template recounts the cells with this rule
            pattern = re.compile(f.stats["expected_regex"])
            recount = sum(1 for v in columns[name] if pattern.fullmatch(v) is None)
        else:
            recount = sum(1 for v in columns[name] if v in set(f.stats["bad_values"]))
        assert recount == f.n_cells


def test_rare_decimal_commas_among_integers_stay_a_shape_error():
    rng = random.Random(3)
    values = shuffled([str(rng.randrange(0, 400)) for _ in range(N - 3)] + ["12,5", "3,25", "7,5"], rng)
    table = make_table({"qty": values})
    flagged = {values[int(r)] for f in detect(table).findings if f.flag for r in f.rows}
    assert flagged == {"12,5", "3,25", "7,5"}
