"""Short issue handles: unique within a run, stable, and taken wherever an id is."""

from __future__ import annotations

from iterate.issueref import SHORT, resolve, short_ids


def test_each_id_gets_a_stable_handle_that_resolves_back() -> None:
    ids = [f"missing-together-column-{k}-and-a-very-long-tail-of-names" for k in range(2000)]
    handles = short_ids(ids)
    assert len(set(handles.values())) == len(ids)  # unique within the run, even where 6 characters collide
    assert all(len(h) >= SHORT for h in handles.values())
    assert short_ids(ids) == handles
    for issue_id in ids[:50]:
        assert resolve(handles[issue_id], ids) == issue_id
        assert resolve(handles[issue_id].upper(), ids) == issue_id
        assert resolve(issue_id, ids) == issue_id


def test_what_names_no_issue_or_several_resolves_to_nothing() -> None:
    ids = ["typos-city", "missing-notes"]
    assert resolve("nope", ids) is None
    assert resolve("abc", ids) is None  # too short to be a handle
    assert resolve("zzzzzz", ids) is None  # not hex
    assert resolve(short_ids(ids)["typos-city"], []) is None
