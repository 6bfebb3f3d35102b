"""Accepted issues: where the file is found, and what an acceptance matches in a later run."""

from __future__ import annotations

import pytest

from iterate.accepted import (
    AcceptError,
    accept,
    accepted_path_for,
    find_accepted,
    load_accepted,
    save_accepted,
    with_acceptances,
)
from iterate.contracts import AcceptedFile, Evidence, Issue


def issue(cells: int, *, type_: str = "unit_in_number", columns: tuple[str, ...] = ("price",)) -> Issue:
    return Issue(
        id="units-price",
        type=type_,
        severity="medium",
        description="d",
        affectedColumns=list(columns),
        suggestedAction="a",
        category="quick_fixes",
        affectedRows=cells,
        evidence=Evidence(affectedCells=cells, affectedRows=cells, affectedShare=0.1),
    )


def test_an_acceptance_matches_by_type_columns_and_values_never_by_id():
    # Given an issue over two values, accepted
    a = accept(issue(5), {"$1", "$2"}, reason="known", by="ana", at="2026-01-01T00:00:00+00:00")
    # Then a later issue with other ids but the same type, columns and values (or fewer) is accepted
    later = issue(5).model_copy(update={"id": "another-id"})
    marked = with_acceptances([later], [a], {"another-id": {"$1"}})[0]
    assert marked.accepted is not None and marked.accepted.reason == "known" and not marked.accepted.grown
    # and more cells with the same values are still accepted, flagged as grown
    grown = with_acceptances([issue(9)], [a], {"units-price": {"$1", "$2"}})[0]
    assert grown.accepted is not None and grown.accepted.grown and grown.accepted.cellsWhenAccepted == 5
    # but a value never seen, another column or another type is not
    assert with_acceptances([issue(5)], [a], {"units-price": {"$1", "$3"}})[0].accepted is None
    assert with_acceptances([issue(5, columns=("cost",))], [a], {"units-price": {"$1"}})[0].accepted is None
    assert with_acceptances([issue(5, type_="mixed_types")], [a], {"units-price": {"$1"}})[0].accepted is None


def test_the_file_is_the_nearest_one_above_the_input_or_a_new_one_beside_it(tmp_path):
    deep = tmp_path / "repo" / "data" / "2026"
    deep.mkdir(parents=True)
    assert find_accepted(deep) is None
    assert accepted_path_for(deep) == deep.resolve() / ".iterate" / "accepted.json"
    # Given a file at the repository's root, every file below it uses that one
    root_file = tmp_path / "repo" / ".iterate" / "accepted.json"
    save_accepted(root_file, AcceptedFile())
    assert find_accepted(deep) == root_file.resolve()
    assert accepted_path_for(deep) == root_file.resolve()
    assert load_accepted(root_file).accepted == []
    assert load_accepted(tmp_path / "missing.json").accepted == []


def test_bad_input_gets_a_specific_error(tmp_path):
    bad = tmp_path / "accepted.json"
    bad.write_text('{"version": 2}')
    with pytest.raises(AcceptError, match=r"accepted\.json: not a valid accepted-issues file"):
        load_accepted(bad)
    with pytest.raises(AcceptError, match="--reason is empty"):
        accept(issue(1), set(), reason=" ", by="x")
    with pytest.raises(AcceptError, match="distinct values"):
        accept(issue(1), {str(k) for k in range(10_001)}, reason="r", by="x")
