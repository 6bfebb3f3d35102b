"""Hostile column names and values (quotes, newlines, `]`, `"`, backslashes, SQL and DQDL fragments) stay data in
every exported file: they parse to exactly the names and values of the table, and the real engines run them."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import engines
import pytest
import yaml
from dqdl_grammar import Composite, Rule, parse, tokenize

from iterate.cli.main import main as iterate_main
from iterate.export import derive, load_run, render
from iterate.export.quote import dqdl_str, number, yaml_str
from iterate.visible import visible

NAMES = ["id", 'quo"te', "new\nline", 'brack]et "x" ]', "back\\slash'", 'Rules = [ IsComplete "y" ]']
VOCAB = ['a"b', "c'd", "e\\f", "g]h", '"); DROP TABLE t; --', 'x" ], IsComplete "z']
HOSTILE = [
    *NAMES,
    *VOCAB,
    "tab\there",
    "\u202eevil",
    "emoji \U0001f600",
    "\\",
    '"',
    "'",
    "]",
    '\\"',
    'a\\\\"b',
]


def _tables(seed: int = 7) -> tuple[list[list[str]], list[list[str]]]:
    rnd = random.Random(seed)
    clean = []
    for n in range(300):
        clean.append(
            [
                f"R{1000 + n}",
                rnd.choice(VOCAB[:4]),
                str(rnd.choice([1, 2, 2, 3, 4, 5])),
                rnd.choice(VOCAB[4:]),
                f"AB-{rnd.randint(10, 99)}",
                rnd.choice(["yes", "no"]),
            ]
        )
    dirty = [list(r) for r in clean]
    for k in (10, 50, 90, 130):
        dirty[k][1] = dirty[k][1] + " "  # stray whitespace after a hostile value
    for k in (20, 120):
        dirty[k][2] = "900"  # outliers
    return dirty, clean


def _write(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(NAMES)
        w.writerows(rows)
    return path


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    work = tmp_path_factory.mktemp("export-hostile")
    dirty_rows, clean_rows = _tables()
    dirty = _write(work / "hostile_dirty.csv", dirty_rows)
    clean = _write(work / "hostile_clean.csv", clean_rows)
    assert iterate_main(["analyze", str(dirty), "--out", str(work / "run"), "--quiet"]) == 0
    return work / "run", dirty, clean, work


def _rules(run_dir: Path):  # type: ignore[no-untyped-def]
    profile, analysis = load_run(run_dir)
    return derive(profile, analysis, run_dir)


@pytest.mark.parametrize("text", HOSTILE)
def test_yaml_and_dqdl_strings_read_back_as_written(text: str) -> None:
    assert yaml.safe_load(f"k: {yaml_str(text)}") == {"k": text}
    tokens = tokenize(dqdl_str(text))
    assert [(t.kind, t.value) for t in tokens] == [("STRING", text)]


def test_numbers_are_plain_decimals() -> None:
    assert [number(x) for x in (1e-05, 9.413, -0.0, 1e21, 3.0)] == [
        "0.00001",
        "9.413",
        "0",
        "1000000000000000000000",
        "3",
    ]


def test_hostile_names_and_values_parse_back_exactly(hostile_run: tuple[Path, ...]) -> None:
    rules = _rules(hostile_run[0])
    names = set(NAMES)
    assert {c.column for c in rules.checks} <= names
    # GX: JSON whose every column and value is one of the table's
    suite = json.loads(render(rules, "gx").text)
    for e in suite["expectations"]:
        kw = e["kwargs"]
        cols = kw.get("column_list") or [kw.get("column") or kw.get("column_A")]
        assert set(cols) <= names
        # (the values proven wrong are the vocabulary written with stray spaces)
        assert {v.strip() for v in kw.get("value_set", [])} <= {*VOCAB, "yes", "no"}
    # Soda: one table, every item one schema or failed-rows check with only the keys SodaCL defines
    soda = render(rules, "soda")
    doc = yaml.safe_load(soda.text)
    assert list(doc) == ["checks for hostile_dirty"]
    items = doc["checks for hostile_dirty"]
    assert len(items) == len(soda.checks)
    for item in items:
        ((key, body),) = item.items()
        assert key in ("schema", "failed rows")
        assert set(body) <= {"name", "fail", "fail condition", "fail query", "warn"}
    assert items[0]["schema"]["fail"]["when required column missing"] == NAMES
    # DQDL: the documented grammar reads one rule per check, each naming a column of the table
    dqdl = render(rules, "dqdl")
    parsed = parse(dqdl.text)
    assert len(parsed) == len(dqdl.checks)
    # DQDL has no escape for a newline: rules on the column named with one are left out, and said so
    assert visible(dqdl.text, keep="\n") == dqdl.text
    assert all("new\nline" not in c.columns for c in dqdl.checks if c.kind != "columns")
    assert dqdl.skipped and all("control character" in why for why in dqdl.skipped.values()), dqdl.skipped
    for rule in parsed:
        for r in rule.rules if isinstance(rule, Composite) else [rule]:
            assert isinstance(r, Rule)
            if r.type != "CustomSql":
                assert set(r.params) <= names
            if r.condition and r.condition[0] == "in":
                assert {v.strip() for v in r.condition[1]} <= {*VOCAB, "yes", "no", "NULL", "EMPTY"}


@pytest.mark.engines
@pytest.mark.parametrize("fmt", ["gx", "soda"])
def test_the_real_engines_run_hostile_rules_as_data(fmt: str, hostile_run: tuple[Path, ...]) -> None:
    run_dir, dirty, clean, work = hostile_run
    rules = _rules(run_dir)
    rendered = render(rules, fmt)
    path = work / f"rules.{fmt}"
    path.write_text(rendered.text, encoding="utf-8")
    numeric = {c.name: k for c in rules.columns if (k := rules.numeric(c.name))}
    from iterate.export.render import soda_name, soda_table

    keys = [c.id if fmt == "gx" else soda_name(c) for c in rendered.checks]
    encoded = {k for k, c in zip(keys, rendered.checks, strict=True) if c.issues}
    assert encoded, "the hostile file has confirmed issues"
    results = engines.run(fmt, path, [dirty, clean], rules.null_values, numeric, soda_table(rules.dataset))
    for csv_path, want_fail, res in zip((dirty, clean), (encoded, set()), results, strict=True):
        assert res["errors"] == []
        assert set(res["results"]) == set(keys)  # every check ran, none was split or lost
        assert {k for k, v in res["results"].items() if v == "fail"} == want_fail, csv_path.name
