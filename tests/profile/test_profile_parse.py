"""Tolerant number and date parsing, and the byte-level helpers that must agree with the regex versions."""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from iterate.profile import parse_dates, parse_numbers
from iterate.profile._bytes import char_lengths, fast_shapes, normalized_hashes, word_counts
from iterate.profile.missing import missing_like
from iterate.profile.shapes import shapes

pytestmark = pytest.mark.unit


def test_given_numbers_written_many_ways_when_parsed_then_values_and_markers():
    text = ["12", " 1,234.50 ", "$12.99", "15%", "12.5 kg", "-3", "abc", "", "12 USD", "1e3", "-$5", "3,5"]
    values, info = parse_numbers(text)
    expected = [12, 1234.5, 12.99, 15, 12.5, -3, np.nan, np.nan, 12, 1000, -5, np.nan]
    np.testing.assert_allclose(values, expected, equal_nan=True)
    assert info.currency.to_pylist() == [
        None,
        None,
        "$",
        None,
        None,
        None,
        None,
        None,
        "USD",
        None,
        "$",
        None,
    ]
    assert info.unit.to_pylist()[4] == "kg"
    assert info.percent.tolist() == [i == 3 for i in range(len(text))]
    assert info.thousands[1] and not info.thousands[0]
    assert info.suffix_counts() == {"$": 2, "%": 1, "kg": 1, "USD": 1}


@pytest.mark.parametrize(
    ("text", "fmt", "expected"),
    [
        (["2020-01-31", "2020-02-30", "2021-02-29", "2020-02-29", "x", "2020-1-3"], "%Y-%m-%d",
         ["2020-01-31", "NaT", "NaT", "2020-02-29", "NaT", "NaT"]),
        (["31/01/2020", "1/3/2020", "30/2/2020"], "%d/%m/%Y", ["2020-01-31", "2020-03-01", "NaT"]),
        (["Mar 1, 2020", "MAR 02, 2020", "Feb 30, 2020"], "%b %d, %Y", ["2020-03-01", "2020-03-02", "NaT"]),
        (["2020-02-28 10:00:00", "2020-02-31 10:00:00", "2020-02-28 10:00"], "%Y-%m-%d %H:%M:%S",
         ["2020-02-28T10:00:00", "NaT", "NaT"]),
    ],
)  # fmt: skip
def test_given_dates_when_parsed_in_a_format_then_impossible_dates_are_nat(text, fmt, expected):
    parsed = parse_dates(text, fmt)
    assert parsed.astype(str).tolist() == [e if e == "NaT" else str(np.datetime64(e, "s")) for e in expected]


def test_fast_shapes_equal_the_regex_shapes_on_random_text():
    rng = np.random.default_rng(0)
    alphabet = [*list("aZ9 -_.,@/()é漢\t\v\f\r\n\x00\x7f"), "  "]
    values = ["".join(rng.choice(alphabet, rng.integers(0, 12))) for _ in range(3000)]
    arr = pa.array(values, pa.string())
    assert fast_shapes(arr).to_pylist() == shapes(arr).to_pylist()
    assert fast_shapes(arr.slice(100, 50)).to_pylist() == shapes(arr.slice(100, 50)).to_pylist()


def test_word_counts_equal_the_regex_count_of_non_space_runs_on_random_text():
    # RE2's \s is space, \t, \n, \r and \f: a vertical tab, a no-break space or an em space is part of a word.
    rng = np.random.default_rng(1)
    alphabet = [*list("aZ9 -.,\t\v\f\r\n\x00"), "\u00a0", "\u2003", "é", "漢", "  "]
    values = ["".join(rng.choice(alphabet, rng.integers(0, 14))) for _ in range(5000)]
    arr = pa.array(values, pa.string())
    for part in (arr, arr.slice(123, 400), pa.array([], pa.string()), pa.array(["", " "])):
        expected = np.asarray(pc.count_substring_regex(part, r"\S+").to_numpy(zero_copy_only=False))
        assert word_counts(part).tolist() == expected.tolist()


def test_char_lengths_count_characters_not_bytes():
    arr = pa.array(["", "abc", "é漢x", "  "])
    assert char_lengths(arr).tolist() == [0, 3, 3, 2]


def test_normalized_hashes_equal_exactly_when_normalised_text_is_equal():
    arr = pa.array([" ACME, Inc.", "acme inc", "Acme-Inc", "acme", "ÉCOLE", "école", "", "  ", "ab", "ba"])
    h = normalized_hashes(arr).tolist()
    assert h[0] == h[1] == h[2]
    assert h[3] != h[0]
    assert h[4] == h[5]
    assert h[6] == h[7]
    assert h[8] != h[9]


def test_missing_like_finds_tokens_case_and_space_free():
    arr = pa.array(["", " ", "N/A", " null ", "NaN", "none", "Nonesuch", "-", "--", "0", "nan!", "?"])
    assert missing_like(arr).tolist() == [
        True,
        True,
        True,
        True,
        True,
        True,
        False,
        True,
        True,
        False,
        False,
        True,
    ]
