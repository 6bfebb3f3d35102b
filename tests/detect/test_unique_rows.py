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
    # detect_sentinels compares them with the trimmed, lower-cased dictionary (ColumnFacts.folded).
    from iterate.detect.missing import _SENTINEL_TEXTS

    texts = _SENTINEL_TEXTS.to_pylist()
    assert texts and all(t == t.strip().lower() for t in texts)
