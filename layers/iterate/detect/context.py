"""Per-column facts the detectors share, computed once on each column's distinct values."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.detect.calibration import DEFAULT
from iterate.profile._bytes import fast_shapes, word_counts
from iterate.profile.shapes import MISSING_TOKENS, digit_masked
from iterate.table import Column, Table

if TYPE_CHECKING:
    from iterate.detect.formats import DateParse
    from iterate.detect.numeric import NumericModel

# Above this many distinct values a column is treated as free text or an identifier: no pairwise work on it.
MAX_PAIRWISE_UNIQUES = 20_000


_FLOAT = r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$"


def to_float(values: pa.Array) -> np.ndarray:
    """Floats of plain numeric strings, NaN elsewhere (vectorised: no Python loop over values)."""
    ok = pc.match_substring_regex(values, pattern=_FLOAT)
    out = np.full(len(values), np.nan)
    idx = np.flatnonzero(np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool))
    if idx.size:
        out[idx] = pc.cast(values.take(pa.array(idx)), pa.float64()).to_numpy(zero_copy_only=False)
    return out


def _encode(values: pa.Array) -> tuple[np.ndarray, list[str]]:
    enc = pc.dictionary_encode(values)
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist()


def _fold(values: pa.Array) -> pa.Array:
    """Trimmed and lower-cased; the array itself where that changes nothing (digits and signs, dates,
    lower-case text: a phone or a timestamp column, millions of distinct values on a long file)."""
    folded = pc.utf8_lower(pc.utf8_trim_whitespace(values))
    return values if folded.equals(values) else folded


def _placeholders() -> pa.Array:
    from iterate.profile.sketch import SENTINEL_DATES, SENTINEL_NUMBERS

    texts = set(SENTINEL_DATES)
    for v in SENTINEL_NUMBERS:
        texts |= {f"{v:g}", f"{v:.1f}", f"{v:.2f}"}
    return pa.array(sorted(texts), pa.string())


# Placeholder numbers and dates as they are written (no letters: compared with folded values as they are).
PLACEHOLDERS = _placeholders()


@dataclass(frozen=True)
class FoldHits:
    """Per distinct value, trimmed and lower-cased: blank, a missing-value token (the null marker included),
    the dataset's null marker, a placeholder text (PLACEHOLDERS)."""

    blank: np.ndarray
    token: np.ndarray
    marker: np.ndarray
    placeholder: np.ndarray


@dataclass
class ColumnFacts:
    """Dictionary-level facts of one column; arrays are indexed by the column's dictionary position."""

    column: Column
    null_marker: str
    # Dictionary positions of values that read as missing-value tokens but are values of this column (NA,
    # Namibia's code, among country codes): see tokens_that_are_values.
    value_tokens: frozenset[int] = frozenset()

    @property
    def name(self) -> str:
        return self.column.name

    @property
    def index(self) -> int:
        return self.column.index

    @property
    def counts(self) -> np.ndarray:
        return self.column.counts

    @cached_property
    def folded(self) -> pa.Array:
        """The distinct values trimmed and lower-cased (what `meanings` keys a short column by)."""
        return _fold(self.column.dictionary)

    @cached_property
    def _fold_hits(self) -> FoldHits:
        """Which distinct values, trimmed and lower-cased, are blank, a missing-value token, the dataset's null
        marker or a placeholder text: one pass over a folded copy that is not kept. (Kept, the near-unique
        columns' folded copies of a 10M-row file were 416 MB, held through the detectors to their peak.)"""
        folded = self.__dict__.get("folded")
        if folded is None:
            folded = _fold(self.column.dictionary)
        marker = self.null_marker.strip().lower()
        tokens = pa.array(sorted(MISSING_TOKENS | {marker}), pa.string())

        def among(values: pa.Array) -> np.ndarray:
            return np.asarray(pc.is_in(folded, value_set=values).to_numpy(zero_copy_only=False), dtype=bool)

        def equal(text: str) -> np.ndarray:
            return np.asarray(pc.equal(folded, text).to_numpy(zero_copy_only=False), dtype=bool)

        return FoldHits(
            blank=equal(""), token=among(tokens), marker=equal(marker), placeholder=among(PLACEHOLDERS)
        )

    @cached_property
    def is_blank(self) -> np.ndarray:
        return self._fold_hits.blank

    @cached_property
    def is_token(self) -> np.ndarray:
        """Blank, the dataset's null marker, or any missing-value token, as written."""
        return self._fold_hits.token

    @property
    def is_placeholder_text(self) -> np.ndarray:
        """A placeholder number or date as written (9999, -1, 1900-01-01), trimmed and lower-cased; whether it
        stands in for missing values is iterate.profile.sketch.disguised_sentinels' call."""
        return self._fold_hits.placeholder

    @cached_property
    def is_missing(self) -> np.ndarray:
        """Blank, the dataset's null marker, or any missing-value token that is not a value of the column."""
        return self._without_values(self.is_token)

    @cached_property
    def is_null_marker(self) -> np.ndarray:
        """Missing written the dataset's own way (blank, or its placeholder when it has no blanks)."""
        return self._without_values(self.is_blank | self._fold_hits.marker)

    def _without_values(self, mask: np.ndarray) -> np.ndarray:
        if not self.value_tokens:
            return mask
        out = mask.copy()
        out[sorted(self.value_tokens)] = False
        return out

    @property
    def markers(self) -> list[str]:
        """Every token read as missing in this column (compared after strip and casefold), for code that
        recounts a finding: the dataset's, less those that are values here."""
        ids = pa.array(sorted(self.value_tokens), pa.int64())
        kept = {str(v) for v in _fold(self.column.dictionary.take(ids)).to_pylist()}
        return [m for m in missing_markers(self.null_marker) if m not in kept]

    @cached_property
    def present(self) -> np.ndarray:
        return ~self.is_missing

    @cached_property
    def n_present(self) -> int:
        return int(self.counts[self.present].sum())

    @cached_property
    def n_present_unique(self) -> int:
        return int(self.present.sum())

    @cached_property
    def shape_codes(self) -> tuple[np.ndarray, list[str]]:
        """Compact, case-insensitive shape per distinct value: codes and the shape strings."""
        return _encode(fast_shapes(self.column.dictionary))

    @cached_property
    def masked_codes(self) -> tuple[np.ndarray, list[str]]:
        """Digit runs masked (`619 patients` → `# patients`): codes and masked strings."""
        return _encode(digit_masked(self.column.dictionary, ascii_only=self.ascii))

    @cached_property
    def ascii(self) -> bool:
        r"""Every value is ASCII: regexes may use [A-Za-z] and [0-9] for \p{L} and \p{Nd}, which RE2 compiles
        into large automata on every call (0.5-25 ms each)."""
        return pc.all(pc.string_is_ascii(self.column.dictionary)).as_py() is not False

    @cached_property
    def has_letter(self) -> np.ndarray:
        values = self.column.dictionary
        pattern = r"[A-Za-z]" if self.ascii else r"\p{L}"
        return np.asarray(
            pc.match_substring_regex(values, pattern=pattern).to_numpy(zero_copy_only=False), dtype=bool
        )

    @cached_property
    def has_digit(self) -> np.ndarray:
        pattern = r"[0-9]" if self.ascii else r"\p{Nd}"
        return np.asarray(
            pc.match_substring_regex(self.column.dictionary, pattern=pattern).to_numpy(zero_copy_only=False),
            dtype=bool,
        )

    @cached_property
    def _head_words(self) -> tuple[np.ndarray, np.ndarray]:
        """The first 2,000 present values that occur (dictionary positions) and the words each holds: what
        free_text and prose judge the column on."""
        present = np.flatnonzero(self.present & (self.counts > 0))[:2000]
        if present.size == 0:
            return present, np.zeros(0, dtype=np.int64)
        return present, word_counts(self.column.dictionary.take(pa.array(present)))

    @cached_property
    def free_text(self) -> bool:
        """Notes, comments, descriptions: most rows hold three words or more, and values rarely repeat (an
        address or a measure's long name repeats across its records; a comment does not)."""
        present, words = self._head_words
        if present.size == 0 or self.typical_count > 2:
            return False
        many = words >= 3
        return bool(self.counts[present][many].sum() > 0.5 * self.counts[present].sum())

    @cached_property
    def prose(self) -> bool:
        """Sentences and long names: most rows hold three words or more and no digit ('Nest never observed
        with full clutch.'), whether or not they repeat. A digit inside one word of a sentence breaks no
        pattern; an address (digits) is not prose."""
        present, words = self._head_words
        if present.size == 0:
            return False
        sentence = (words >= 3) & ~self.has_digit[present]
        return bool(self.counts[present][sentence].sum() > 0.5 * self.counts[present].sum())

    @cached_property
    def smallest_group(self) -> int:
        """Rows held by the column's rarest value."""
        used = self.counts[self.counts > 0]
        return int(used.min()) if used.size else 0

    @cached_property
    def typical_count(self) -> float:
        """How many rows hold the value that holds the column's median present row (1 for unique values)."""
        return _typical(self.counts[self.present])

    @cached_property
    def numeric(self) -> NumericModel:
        """What the column's values read as when taken as numbers (see iterate.detect.numeric)."""
        from iterate.detect.numeric import numeric_model

        return numeric_model(self)

    @cached_property
    def dates(self) -> DateParse | None:
        """The column's distinct values read as dates and times, when it looks like a date column."""
        from iterate.detect.formats import date_parse

        return date_parse(self)

    @cached_property
    def list_delimiter(self) -> str | None:
        """The delimiter of a column of lists ('IT,FR', '1, 5, 8'), None for single values (see
        iterate.detect.lists): such a column holds items of a vocabulary, judged item by item."""
        from iterate.detect.lists import find_delimiter

        return find_delimiter(self)

    @cached_property
    def meaning(self) -> Meaning:
        """The column's values by what they say: spellings that differ only in case, spacing, how a number
        or a time of day is written share one key (see `meanings`)."""
        return meanings(self)

    # What each column's detectors cache per distinct value (numbers, folded spellings, meanings): the largest
    # part of the detection's memory past the table (470 MB on 3M rows x 20 columns), read by no step after the
    # detectors. Dropped before the decision (`release`); read again, a property is computed again.
    HEAVY_CACHES = ("numeric", "folded", "meaning", "dates", "shape_codes", "masked_codes")

    def release(self) -> None:
        """Forget the per-value caches (HEAVY_CACHES); they are computed again if read after."""
        for name in self.HEAVY_CACHES:
            self.__dict__.pop(name, None)

    @property
    def pairwise_ok(self) -> bool:
        return self.column.n_unique <= MAX_PAIRWISE_UNIQUES


class Identity:
    """`np.arange(n)` without the array: `identity[keys]` is a copy of `keys` (as int64, as arange's would be).
    The spelling of a column keyed by its text is each value itself: on 10M rows x 20 columns the two
    near-unique columns' aranges were 160 MB, held through the detectors' phase (the run's peak)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, keys: Any) -> np.ndarray:
        picked = np.array(keys, dtype=np.int64)
        if picked.size and (int(picked.min()) < -self.n or int(picked.max()) >= self.n):
            raise IndexError(f"index out of range for an identity of {self.n}")
        return np.where(picked < 0, picked + self.n, picked)


@dataclass
class Meaning:
    """Per dictionary code: the key of what the value says (-1: missing); per key: its most common spelling."""

    key_of: np.ndarray
    n_keys: int
    spelling: np.ndarray | Identity
    row_codes: np.ndarray  # the column's per-row dictionary codes

    @property
    def codes(self) -> np.ndarray:
        """Per row: its key (-1: missing). Built on each call: a long column's row array is not kept."""
        return self.key_of[self.row_codes]


# A time of day however it is written: 7:10 a.m., 7:10am, 07:10, 7:10 PM, 19:10:00 (a text before it, such as
# a date, is kept as written).
_TIME = r"^(?P<pre>.*?)(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2}))? ?(?P<ap>[ap])?(?:\.? ?m\.?)?$"
# A plain number with a decimal point or exponent, or an integer without a leading zero (06 is a code).
_PLAIN_NUMBER = r"^[-+]?(?:(?:0|[1-9]\d*)(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?$"


def meanings(f: ColumnFacts) -> Meaning:
    """Key each distinct value by what it says, so that entities agree across sources that write alike
    things differently: case and spacing folded; `6.0` and `6` one number (not `06`, a code); `7:10 a.m.`,
    `7:10am` and `07:10` one time of day.

    A column of more than MAX_PAIRWISE_UNIQUES distinct values (ids, timestamps, free text) is keyed by its
    text: reading a million values as times and numbers costs seconds, and such a column is rarely an
    entity's attribute spelled several ways."""
    if f.column.n_unique > MAX_PAIRWISE_UNIQUES:
        per_code = np.where(f.is_missing, -1, np.arange(f.column.n_unique)).astype(f.column.codes.dtype)
        return Meaning(per_code, f.column.n_unique, Identity(f.column.n_unique), f.column.codes)
    folded = pc.replace_substring_regex(f.folded, pattern=r"\s+", replacement=" ")
    keys = folded
    timed = pc.extract_regex(folded, pattern=_TIME)
    if pc.any(pc.is_valid(timed)).as_py():
        field = {
            name: pc.fill_null(pc.struct_field(timed, name), "") for name in ("pre", "h", "mi", "s", "ap")
        }
        hour = pc.cast(pc.if_else(pc.equal(field["h"], ""), "0", field["h"]), pa.int64())
        pm, am = pc.equal(field["ap"], "p"), pc.equal(field["ap"], "a")
        clock = pc.and_(pc.greater_equal(hour, 1), pc.less_equal(hour, 12))
        hour = pc.if_else(
            pm, pc.add(pc.remainder(hour, 12), 12), pc.if_else(am, pc.remainder(hour, 12), hour)
        )
        # 17:10 pm says two things: it is left as written.
        sound = pc.and_(pc.is_valid(timed), pc.or_(pc.equal(field["ap"], ""), clock))
        second = pc.if_else(pc.equal(field["s"], ""), "00", field["s"])
        # A text before the time (a date) is kept, unless most times of the column are written without
        # one: then it is a way of writing, not a part of the value (7:10 a.m. beside Dec 1 7:10 a.m.).
        pre = pc.utf8_trim_whitespace(field["pre"])
        bare = pc.sum(pc.and_(sound, pc.equal(pre, "")).cast(pa.int64()).take(pa.array(f.column.codes)))
        timed_rows = pc.sum(sound.cast(pa.int64()).take(pa.array(f.column.codes)))
        if (bare.as_py() or 0) * 2 >= (timed_rows.as_py() or 0):
            pre = pc.if_else(sound, "", pre)
        key = pc.binary_join_element_wise(
            pre,
            "\x00t",
            pc.utf8_lpad(pc.cast(hour, pa.string()), width=2, padding="0"),
            ":",
            field["mi"],
            ":",
            second,
            "",
        )
        keys = pc.if_else(pc.fill_null(sound, False), key, keys)
    numbers = to_float(keys)
    plain = np.asarray(pc.match_substring_regex(keys, pattern=_PLAIN_NUMBER).to_numpy(zero_copy_only=False))
    numeric = plain.astype(bool) & np.isfinite(numbers)
    if numeric.any():
        as_number = pc.binary_join_element_wise("\x00n", pc.cast(pa.array(numbers), pa.string()), "")
        keys = pc.if_else(pa.array(numeric), as_number, keys)
    encoded = pc.dictionary_encode(keys)
    key_of = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    n_keys = len(encoded.dictionary)
    # The spelling each key is shown by: its most common.
    order = np.lexsort((-f.counts, key_of))
    first = np.r_[True, key_of[order][1:] != key_of[order][:-1]]
    spelling = np.zeros(n_keys, dtype=np.int64)
    spelling[key_of[order][first]] = order[first]
    per_code = np.where(f.is_missing, -1, key_of).astype(f.column.codes.dtype)
    return Meaning(per_code, n_keys, spelling, f.column.codes)


def as_written(f: ColumnFacts, mask: np.ndarray) -> list[str]:
    """The values the rows of `mask` hold, as written (stripped, sorted, each once)."""
    return sorted({v.strip() for v in f.column.texts(np.flatnonzero(mask & (f.counts > 0)))})


def missing_markers(null_marker: str) -> list[str]:
    """Every token read as missing (compared after strip and casefold), for code that recounts a finding."""
    return sorted(MISSING_TOKENS | {null_marker.strip().lower()})


def dataset_null_marker(table: Table) -> str:
    """The dataset's own way to write a missing value: blank when it has blanks, else its most used placeholder."""
    token_counts: dict[str, int] = {}
    blanks = 0
    for col in table.columns:
        folded = pc.utf8_lower(pc.utf8_trim_whitespace(col.dictionary))
        hit = np.flatnonzero(
            np.asarray(
                pc.is_in(folded, value_set=pa.array(sorted(MISSING_TOKENS), pa.string())).to_numpy(
                    zero_copy_only=False
                ),
                dtype=bool,
            )
        )
        for i in hit:
            tok = str(col.dictionary[int(i)].as_py()).strip()
            if tok == "":
                blanks += int(col.counts[i])
            else:
                token_counts[tok] = token_counts.get(tok, 0) + int(col.counts[i])
    if blanks or not token_counts:
        return ""
    return max(token_counts.items(), key=lambda kv: kv[1])[0]


def facts_for(table: Table, null_marker: str) -> list[ColumnFacts]:
    facts = [ColumnFacts(c, null_marker) for c in table.columns]
    tokens_that_are_values(facts)
    return facts


# A word (letters only) that names nothing missing by itself when it is a title: 'Missing' (a film), 'None'.
_WORD = re.compile(r"^[^\W\d_]{3,}$")
CODE_SHAPE_SHARE = 0.9  # a code column: this share of its filled rows writes its values in one exact shape
ONE_TO_ONE_SLACK = 0.02  # pairs of values beyond a one-to-one correspondence, as a share of its values


def _char_shape(value: str) -> str:
    """Each character's kind, case kept and nothing collapsed: NA and US are AA, 7a is 9a."""
    return "".join("A" if c.isupper() else "a" if c.islower() else "9" if c.isdigit() else c for c in value)


def _char_shape_regex(shape: str) -> str:
    """A regex a (trimmed) value fully matches when its _char_shape is `shape`."""
    parts = {"A": r"\p{Lu}", "a": r"\p{Ll}", "9": r"\p{Nd}"}
    return "^" + "".join(parts.get(c, re.escape(c)) for c in shape) + "$"


def tokens_that_are_values(facts: list[ColumnFacts]) -> None:
    """Mark the missing-value tokens that are values of their column (sets `value_tokens`):

    - a code in a column that codes another one to one, written in the shape of its codes and standing, like
      every other code, for exactly one value of that column (NA is Namibia's ISO code: every row of Namibia
      has NA, and only those rows);
    - a word written once in a column of nearly unique names or titles ('Missing' is a 1982 film): a
      placeholder repeats across the records it stands in for;
    - a word held by as many rows as the column's usual values, in a column that writes its gaps blank ('None'
      among the kinds of stuffing a survey offers).
    """
    for f in facts:
        if not f.pairwise_ok:
            continue
        candidates = np.flatnonzero(f.is_token & ~f.is_blank & (f.counts > 0))
        if candidates.size == 0:
            continue
        filled = np.flatnonzero(~f.is_token & (f.counts > 0))
        n_filled = int(f.counts[filled].sum())
        if n_filled < 20:
            continue
        uniques = f.column.uniques
        keep: set[int] = set()
        # Names or titles: nearly every filled row holds its own value, and the values are words.
        lettered = int(f.counts[filled][f.has_letter[filled]].sum())
        if filled.size >= 0.9 * n_filled and lettered >= 0.9 * n_filled:
            keep |= {int(t) for t in candidates if f.counts[t] == 1 and _WORD.match(uniques[t].strip())}
        # An answer of a vocabulary that writes its gaps blank: 'None' among a survey's stuffing kinds, as
        # common as a usual answer (not a rarity of it, see detect_rare_values), beside blanks for those who
        # did not answer.
        blanks = int(f.counts[f.is_blank].sum())
        typical = _typical(f.counts[filled])  # not f.typical_count: that would cache is_missing before this
        if blanks and typical >= DEFAULT.rare_min_typical:
            keep |= {
                int(t)
                for t in candidates
                if f.counts[t] * DEFAULT.rare_min_ratio >= typical and f.has_letter[t]
            }
        coded = [int(t) for t in candidates if f.counts[t] >= 2 and int(t) not in keep]
        if coded:
            # The token is written in the shape that most filled rows keep to (a shape kept by 90% of them is
            # the column's only such shape): counted with one regex pass over the distinct values per token.
            trimmed = pc.utf8_trim_whitespace(f.column.dictionary)
            filled_mask = np.zeros(f.column.n_unique, dtype=bool)
            filled_mask[filled] = True
            for t in coded:
                pattern = _char_shape_regex(_char_shape(uniques[t].strip()))
                same = np.asarray(
                    pc.fill_null(pc.match_substring_regex(trimmed, pattern=pattern), False).to_numpy(
                        zero_copy_only=False
                    ),
                    dtype=bool,
                )
                if f.counts[same & filled_mask].sum() >= CODE_SHAPE_SHARE * n_filled and _codes_one(
                    f, t, facts
                ):
                    keep.add(t)
        if keep:
            f.value_tokens = frozenset(keep)


def _typical(counts: np.ndarray) -> float:
    """How many rows hold the value that holds the median row (see ColumnFacts.typical_count)."""
    c = np.sort(counts[counts > 0])
    if c.size == 0:
        return 1.0
    cum = np.cumsum(c)
    return float(c[min(int(np.searchsorted(cum, cum[-1] / 2)), c.size - 1)])


def _codes_one(f: ColumnFacts, token: int, facts: list[ColumnFacts]) -> bool:
    """Whether the token stands for exactly one value of a column that `f` codes one to one: the value is
    held by the token's rows and by no other row, and each code of `f` goes with one value there and back."""
    codes = f.column.codes
    at = codes == token
    n_f = int((f.counts > 0).sum())
    for g in facts:
        if g.index == f.index or g.column.n_unique < 3:
            continue
        theirs = np.unique(g.column.codes[at])
        if theirs.size != 1 or g.counts[theirs[0]] != f.counts[token] or g.is_token[theirs[0]]:
            continue
        n_g = int((g.counts > 0).sum())
        if min(n_f, n_g) < (1 - ONE_TO_ONE_SLACK) * max(n_f, n_g):
            continue
        pairs = np.unique(codes * np.int64(len(g.counts)) + g.column.codes).size
        if pairs <= (1 + ONE_TO_ONE_SLACK) * max(n_f, n_g):
            return True
    return False
