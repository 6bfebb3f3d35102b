"""Finding rows: distinct rows come out ascending whether the detector listed them in order or not."""

import numpy as np
import pytest

from iterate.detect.findings import Finding, unique_rows


@pytest.mark.parametrize(
    "rows",
    [[], [4], [0, 0, 1, 5, 5, 5, 9], [9, 1, 1, 3, 0], [2, 2, 2], [*range(1000), 3]],
)
def test_unique_rows_matches_numpy(rows: list[int]) -> None:
    array = np.asarray(rows, dtype=np.int64)
    assert unique_rows(array).tolist() == np.unique(array).tolist()


def test_finding_counts_each_row_once() -> None:
    rows = np.array([3, 3, 7, 1], dtype=np.int64)
    finding = Finding(
        type="missing_values",
        columns=["a"],
        rows=rows,
        cols=np.array([0, 1, 0, 0]),
        title="t",
        description="d",
        suggested_action="s",
        category="quick_fixes",
        detector="test",
    )
    assert finding.n_rows == 3
    assert finding.unique_rows().tolist() == [1, 3, 7]


def test_placeholder_texts_are_unchanged_by_lower_casing() -> None:
    # detect_sentinels compares them with the trimmed, lower-cased dictionary (ColumnFacts.is_placeholder_text).
    from iterate.detect.context import PLACEHOLDERS

    texts = PLACEHOLDERS.to_pylist()
    assert texts and all(t == t.strip().lower() for t in texts)


def test_row_keys_from_per_value_codes_equal_row_keys_from_per_row_codes() -> None:
    # Given columns with few values (many equal rows) and one with many, some given as per-value codes
    # (normalised codes of each distinct value) and the rows' codes, as the near-duplicate search gives them
    from iterate.detect.rows import _row_keys

    rng = np.random.default_rng(4)
    n = 50_000
    per_value = [rng.integers(0, 3, 10), rng.integers(0, 40, 100), np.arange(n // 2)[::-1].copy()]
    row_codes = [rng.integers(0, 10, n).astype(np.int32), rng.integers(0, 100, n).astype(np.int32)]
    row_codes.append((np.arange(n) % (n // 2)).astype(np.int32))
    row_codes[2][7] = row_codes[2][n // 2 + 7]  # repeats on the last column too
    materialised = [v[c] for v, c in zip(per_value, row_codes, strict=True)]
    # Then the keys are the same whether the per-row codes are made up front or column by column
    expected = _row_keys(materialised, n)
    assert _row_keys(list(zip(per_value, row_codes, strict=True)), n).tolist() == expected.tolist()
    mixed = [materialised[0], (per_value[1], row_codes[1]), materialised[2]]
    assert _row_keys(mixed, n).tolist() == expected.tolist()  # type: ignore[arg-type]
    # And rows equal on every column share a key, others do not
    rows = np.stack(materialised, axis=1)
    first = {}
    for r, key in enumerate(expected.tolist()):
        first.setdefault(tuple(rows[r]), key)
        assert first[tuple(rows[r])] == key
    assert len(set(expected.tolist())) == len(first)
