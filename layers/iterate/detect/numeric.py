"""Numbers: what a column's values read as, and where its bulk lies.

A column is numeric when a majority of its rows read as a number with nothing left over. Two signals come from
that model here: values that do not read as a number at all (`22..`, `g2011`), and numbers far from the
column's bulk on the scale that suits it (log for positive quantities spanning magnitudes). How the column
writes its digits is digits.py's; far-off numbers another column explains, explained.py's.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.detect.calibration import DEFAULT, Calibration, repeat_discount, share_llr
from iterate.detect.context import ColumnFacts
from iterate.detect.findings import MAX_LISTED, Finding, value_finding
from iterate.profile.parse import comma_to_point, decimal_convention
from iterate.wording import agree, plural

# A number with nothing left over: sign, digits with an optional point, exponent; or thousands groups.
NUMBER = r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$"
GROUPED = r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$"
_PARTS = r"^[-+]?0*(?P<int>\d*?)(?P<zeros>0*)(?:\.(?P<frac>\d*))?(?:[eE][-+]?\d+)?$"


def _lost_zeros(counts: np.ndarray, total: float) -> bool:
    """Widths of a zip column stored as integers (Parquet, xlsx): five digits for many rows, three or four
    (the zeros lost) for a good share of them, and hardly anything else."""
    short, five = counts[3:ZIP_WIDTH].sum(), counts[ZIP_WIDTH]
    return bool(five >= 0.3 * total and short >= 0.1 * five and short + five >= 0.9 * total)


# A semantic hint a user's data allows: a column called zip (zip, zipcode, billing_zip) holds US zip codes.
ZIP_NAME = re.compile(r"(?i)(?:^|[^a-z])zip(?:code)?(?:[^a-z]|$)")
ZIP_WIDTH = 5


def _bools(arr: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.cumsum(w)
    return float(v[min(int(np.searchsorted(cum, q * cum[-1])), v.size - 1)])


@dataclass
class NumericModel:
    """Per distinct present value of a column: the number it reads as and how it is written."""

    facts: ColumnFacts
    ids: np.ndarray  # dictionary positions of present values that occur
    weights: np.ndarray  # rows holding each
    numbers: np.ndarray  # the number each reads as (NaN: not a number)
    decimals: np.ndarray  # digits after the decimal point, as written
    digits: np.ndarray  # significant digits, as written
    convention: str = "point"  # the decimal separator: "point", or "comma" when the values prove it

    @property
    def is_number(self) -> np.ndarray:
        return ~np.isnan(self.numbers)

    @cached_property
    def share(self) -> float:
        """Share of the column's present rows that read as a number."""
        total = float(self.weights.sum())
        return float(self.weights[self.is_number].sum() / total) if total else 0.0

    @property
    def numeric(self) -> bool:
        return self.share >= DEFAULT.parse_min_share and self.weights.sum() > 0

    @cached_property
    def widths(self) -> np.ndarray:
        """Characters written per value, sign left out (`00042` → 5)."""
        text = pc.utf8_trim_whitespace(self.facts.column.dictionary.take(pa.array(self.ids, pa.int64())))
        return np.asarray(pc.utf8_length(pc.utf8_ltrim(text, characters="+-")).to_numpy(zero_copy_only=False))

    @cached_property
    def code_width(self) -> int | None:
        """The width of a column of codes written with leading zeros (zip `02108`, account `00042`): integers
        that a majority of rows write with one width, some with a leading zero. None otherwise."""
        if not self.numeric:
            return None
        whole = self.is_number & (self.decimals == 0) & (self.digits >= 0)
        if self.weights[whole].sum() < 0.5 * self.weights.sum():
            return None
        counts = np.bincount(self.widths[whole], weights=self.weights[whole], minlength=ZIP_WIDTH + 1)
        total = self.weights.sum()
        if ZIP_NAME.search(self.facts.name) and _lost_zeros(counts, total):
            return ZIP_WIDTH
        width = int(counts.argmax())
        zero_led = self.facts.column.dictionary.take(pa.array(self.ids[whole], pa.int64()))
        leading = _bools(pc.match_substring_regex(pc.utf8_trim_whitespace(zero_led), r"^[-+]?0\d"))
        # Padding is the column's convention when several of its codes show it: one zero-led value among a
        # counter's 1..2692 is a slip of its own, not a sign that the short values lost their zeros.
        padded = float(self.weights[whole][leading].sum())
        if counts[width] < 0.5 * total or int(leading.sum()) < 2 or padded < 0.01 * counts[width]:
            return None
        return width

    def typical(self, what: np.ndarray) -> float:
        """The row-weighted median of a per-value quantity over the values that are numbers."""
        ok = self.is_number
        return weighted_quantile(what[ok].astype(np.float64), self.weights[ok].astype(np.float64), 0.5)


SAMPLE_IDS = 5_000  # distinct values a big column's numeric share is first judged on


def _not_numbers(f: ColumnFacts, ids: np.ndarray, convention: str = "point") -> NumericModel:
    """The model of a column none of whose values reads as a number. Its numbers (NaN) and digit counts (0) are
    read-only views of one value, not arrays: a column of ids, e-mails or timestamps holds about one distinct
    value a row, and their 16 bytes a value were kept through the detection (320 MB for two such columns of a
    10M-row file) to say nothing."""
    nothing = np.broadcast_to(np.float64(np.nan), ids.shape)
    zeros = np.broadcast_to(np.int32(0), ids.shape)
    return NumericModel(f, ids, _weights(f, ids), nothing, zeros, zeros, convention)


def _weights(f: ColumnFacts, ids: np.ndarray) -> np.ndarray:
    """Rows holding each of `ids`: where they are every dictionary position in order (a column without gaps),
    a read-only view of the column's counts rather than a copy (80 MB for a near-unique column of 10M rows)."""
    counts = f.counts
    # ids ascend (flatnonzero): as many as the counts means every position, in order.
    if ids.size == counts.size and counts.dtype == np.int64:
        shared = counts.view()
        shared.flags.writeable = False
        return shared
    return counts[ids].astype(np.int64)


def numeric_model(f: ColumnFacts) -> NumericModel:
    ids = np.flatnonzero(f.present & (f.counts > 0))
    if not f.has_digit[ids].any():
        return _not_numbers(f, ids)  # a number has a digit: a column of words reads as none
    if ids.size > 4 * SAMPLE_IDS:
        # A big column of text (names, ids with letters) is told apart on a sample before every value is read.
        pick = np.random.default_rng(3).choice(ids, SAMPLE_IDS, replace=False)
        sample = pc.utf8_trim_whitespace(f.column.dictionary.take(pa.array(pick, pa.int64())))
        reads = _bools(pc.match_substring_regex(sample, NUMBER)) | _bools(
            pc.match_substring_regex(sample, GROUPED)
        )
        weights = f.counts[pick].astype(np.float64)
        if weights[reads].sum() < 0.5 * DEFAULT.parse_min_share * weights.sum():
            return _not_numbers(f, ids)
    text = pc.utf8_trim_whitespace(f.column.dictionary.take(pa.array(ids, pa.int64())))
    # A column that proves the decimal-comma convention (`3,5`, `1.234,56`) is read in it.
    convention = "point"
    if pc.any(pc.match_substring(text, ",")).as_py() and (
        decimal_convention(text, f.counts[ids].astype(np.float64)) == "comma"
    ):
        text, _ = comma_to_point(text)
        convention = "comma"
    plain = _bools(pc.match_substring_regex(text, NUMBER))
    grouped = _bools(pc.match_substring_regex(text, GROUPED)) & ~plain
    numbers = np.full(ids.size, np.nan)
    for mask, source in ((plain, text), (grouped, pc.replace_substring(text, ",", ""))):
        where = np.flatnonzero(mask)
        if where.size:
            numbers[where] = np.asarray(
                pc.cast(source.take(pa.array(where)), pa.float64()).to_numpy(zero_copy_only=False)
            )
    numbers[~np.isfinite(numbers)] = np.nan
    if np.isnan(numbers).all():
        return _not_numbers(f, ids, convention)  # digits, no number (dates, phones with dashes): as above
    # How each number is written, read only where there is one (a value that is not one counts 0 digits):
    # the extraction is the costliest regex here, and a column of e-mails or dates with digits has few.
    decimals = np.zeros(ids.size, dtype=np.int64)
    digits = np.zeros(ids.size, dtype=np.int64)
    where = np.flatnonzero(~np.isnan(numbers))
    if where.size:
        written = text.take(pa.array(where))
        parts = pc.extract_regex(pc.replace_substring(written, ",", ""), _PARTS)
        frac = pc.fill_null(pc.struct_field(parts, "frac"), "")
        whole = pc.fill_null(pc.struct_field(parts, "int"), "")
        zeros = pc.fill_null(pc.struct_field(parts, "zeros"), "")
        has_point = _bools(pc.match_substring(written, "."))
        decimals[where] = np.asarray(pc.utf8_length(frac).to_numpy(zero_copy_only=False), dtype=np.int64)
        # Significant digits: leading zeros never count; trailing zeros of an integer do not either (1000 is
        # one digit of precision), those after a decimal point do (0.50 is written to two).
        joined = pc.binary_join_element_wise(whole, zeros, frac, "")
        sig = np.asarray(pc.utf8_length(pc.utf8_ltrim(joined, characters="0")).to_numpy(zero_copy_only=False))
        bare = np.asarray(pc.utf8_length(pc.utf8_ltrim(whole, characters="0")).to_numpy(zero_copy_only=False))
        digits[where] = np.where(has_point, sig, bare)
    # Counts of digits fit 32 bits: half the memory on a million-value column.
    return NumericModel(
        f,
        ids,
        _weights(f, ids),
        numbers,
        decimals.astype(np.int32),
        digits.astype(np.int32),
        convention,
    )


def _values(f: ColumnFacts, ids: np.ndarray) -> list[str]:
    return sorted(set(f.column.texts(ids)))[:MAX_LISTED]


SHAPE_SAMPLE = 5_000  # distinct values that are not numbers, judged for their layouts
REGULAR_SHARE = 0.8  # the share of a column's other values that must follow its own regular layouts


def _layout(text: str) -> str:
    """A value's layout: each digit a 9, each letter an a, other characters as they are (`NW10 2BH` is
    `aa99 9aa`, `91-348` is `99-999`)."""
    return "".join("9" if c.isdigit() else "a" if c.isalpha() else c for c in text.strip())


# A code's own layout joins groups of digits or letters with a separator (`99-999`, `a9a 9a9`); a number
# gone wrong has a letter in place of a digit or a point (`3x10x`, `4v`) instead.
CODE_LAYOUT = re.compile(r"[a9][ /-][a9]")


def _multi_format_code(f: ColumnFacts, m: NumericModel) -> bool:
    """Whether the column is a code written in several formats (postcodes of several countries): its
    numbers are whole and some keep leading zeros (`02401`: no quantity is written so), and the values that
    are not numbers follow layouts of their own, each shared by several of them and joining groups with a
    separator (`99-999`, `a9a 9a9`), none doubled (`0..24` is a number gone wrong)."""
    ok = m.is_number
    whole = ok & (m.decimals == 0)
    if m.weights[whole].sum() < 0.9 * m.weights[ok].sum():
        return False
    written = pc.utf8_trim_whitespace(f.column.dictionary.take(pa.array(m.ids[whole], pa.int64())))
    if int(_bools(pc.match_substring_regex(written, r"^[-+]?0[0-9]")).sum()) < 2:
        return False
    layouts = Counter(_layout(t) for t in f.column.texts(m.ids[~ok][:SHAPE_SAMPLE]))
    if any(re.search(r"([^a9])\1", s) for s in layouts):
        return False
    regular = sum(n for s, n in layouts.items() if n >= 2 and CODE_LAYOUT.search(s))
    return regular >= REGULAR_SHARE * sum(layouts.values())


def detect_invalid_numbers(f: ColumnFacts, m: NumericModel, cal: Calibration = DEFAULT) -> Finding | None:
    """Values that do not read as a number in a column whose rows mostly do."""
    if not m.numeric or m.share >= 1.0:
        return None
    bad = ~m.is_number
    if not bad.any():
        return None
    if _multi_format_code(f, m):
        return None
    if f.list_delimiter is not None:
        return None  # lists of numbers ('1, 5, 8') are lists of codes: their items are judged as a vocabulary
    # A value the column repeats is likelier a code it uses (`N/R`) than a slip.
    llr = share_llr(m.share, cal.parse_bonus) - repeat_discount(m.weights[bad], f.typical_count, cal)
    ids = m.ids[bad]
    has_letter = f.has_letter[ids]
    kind = "mixed_types" if has_letter.mean() >= 0.5 else "format_violation"
    name = f.name

    def describe(fd: Finding) -> str:
        values = fd.stats["bad_values"]
        shown = ", ".join(repr(v) for v in values[:4])
        return (
            f"{plural(fd.n_cells, 'value')} in '{name}' ({len(values):,} distinct) "
            f"{agree(fd.n_cells, 'does', 'do')} not read as a number, while "
            f"{m.share:.1%} of the column's filled rows do; for example {shown}."
        )

    return value_finding(
        f,
        ids,
        llr,
        np.full(ids.size, m.share),
        type=kind,
        columns=[name],
        title=f"Text in the numeric column {name}"
        if kind == "mixed_types"
        else f"Malformed numbers in {name}",
        description="",
        describe=describe,
        suggested_action="Correct these values at the source or re-key them as plain numbers; values that "
        "cannot be recovered should be set to missing.",
        category="smart_fixes" if kind == "mixed_types" else "quick_fixes",
        detector="parse",
        stat_name="share of the column's rows that read as numbers",
        stats={
            "column": name,
            "rule": "number",
            "bad_values": _values(f, ids),
            "numeric_share": m.share,
            "convention": m.convention,
        },
        key=f"parse:{name}",
    )


SHARE_NAME = re.compile(r"(?i)(?:perc|pct|percent|proportion|share|fraction)")
SHARE_PAD = 0.005  # of the bound: how far inside 0 and the bound a share's log-odds are taken


def share_top(name: str, x: np.ndarray, w: np.ndarray) -> float | None:
    """The bound of a column of shares (100 for percentages, 1 for proportions) when its name says it holds
    shares and (nearly) every row lies within it; None otherwise. A share beyond it is impossible."""
    if SHARE_NAME.search(name) is None or x.size == 0:
        return None
    total = float(w.sum())
    for top in (1.0, 100.0):
        if float(w[(x < 0) | (x > top)].sum()) <= DEFAULT.offscale_share * total:
            if top == 1.0 and float(x.max()) > 1.0 and float(w[x > 1.0].sum()) > 0.01 * total:
                continue  # percentages with some above 1, not proportions
            return top
    return None


@dataclass(frozen=True)
class Scale:
    """Where a column's bulk lies: centre and spread on the scale that suits it.

    `kind`: "linear"; "log" for positive quantities spanning magnitudes (prices, thicknesses); "log1p" for
    counts and amounts that are never negative but often zero (riders per hour); "log0" for amounts that
    are zero in most rows and spread over magnitudes otherwise (rainfall, spending): zeros sit in the bulk
    and the other values are judged on the log scale among themselves; "logit" for shares bounded by `top`
    (100 for percentages, 1 for proportions) that crowd against a bound (the share of white residents, 98%
    in most counties): the log-odds, on which 57% is as far below 98% as 2% is above it.
    """

    kind: str
    center: float
    spread: float
    top: float = 0.0  # the bound of a share (logit only)
    # The spread of each tail where it is wider than the bulk's (a heavy tail): 0 means `spread`.
    low_spread: float = 0.0
    high_spread: float = 0.0

    @property
    def log(self) -> bool:
        return self.kind.startswith("log") and self.kind != "logit"

    def transform(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.kind == "logit":
                pad = SHARE_PAD * self.top  # 0 and 100 stay finite: half a point of a percentage
                inside = (x >= 0) & (x <= self.top)
                safe = np.where(inside, x, 0.0)
                return np.where(inside, np.log((safe + pad) / (self.top - safe + pad)), np.inf)
            if self.kind == "log":
                return np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), -np.inf)
            if self.kind == "log0":
                logged = np.log(np.where(x > 0, x, 1.0))
                return np.where(x > 0, logged, np.where(x == 0, self.center, -np.inf))
            if self.kind == "log1p":
                return np.where(x >= 0, np.log1p(np.where(x >= 0, x, 0.0)), -np.inf)
        return x

    def z(self, x: np.ndarray) -> np.ndarray:
        # No positive quantity is zero or below, no count is negative: those lie infinitely far.
        with np.errstate(invalid="ignore"):
            d = self.transform(x) - self.center
            low, high = self.low_spread or self.spread, self.high_spread or self.spread
            return np.where(d > 0, d / high, -d / low)

    def bounds(self, z: float) -> tuple[float, float]:
        low, high = self.low_spread or self.spread, self.high_spread or self.spread
        lo, hi = self.center - z * low, self.center + z * high
        if self.kind in ("log", "log0"):
            return math.exp(lo), math.exp(hi)
        if self.kind == "log1p":
            return max(math.expm1(lo), 0.0), math.expm1(hi)
        if self.kind == "logit":
            pad = SHARE_PAD * self.top

            def back(t: float) -> float:
                e = math.exp(min(t, 700.0))
                return min(max((e * (self.top + pad) - pad) / (1.0 + e), 0.0), self.top)

            return back(lo), back(hi)
        return lo, hi


def _bowley(values: np.ndarray, weights: np.ndarray) -> tuple[float, float, float, float]:
    """Octile skewness (Bowley's quartile skewness taken at 1/8 and 7/8): tails decide the scale outliers
    are judged on, so they must weigh in its choice."""
    q1, q2, q3 = (weighted_quantile(values, weights, q) for q in (0.125, 0.5, 0.875))
    skew = (q3 + q1 - 2 * q2) / (q3 - q1) if q3 > q1 else 0.0
    return q1, q2, q3, skew


def domain_tier(w: np.ndarray, cal: Calibration = DEFAULT) -> np.ndarray | None:
    """The values of a column's domain, when it has one: the most common values, holding most rows, each at
    least `frequency_min_ratio` times as common as any value outside (a flag's 0 and 1, a season's 1-4,
    the four wind speeds of a wind tunnel). None for a column whose counts fall off smoothly (counts of
    riders, prices), where no tier stands out."""
    if w.size < 3:
        return None
    order = np.argsort(-w, kind="stable")
    c = w[order]
    ratios = c[:-1] / np.maximum(c[1:], 1e-9)
    cum = np.cumsum(c)
    # The smallest such domain of two values or more (a spread needs two).
    for k in np.flatnonzero((ratios >= cal.frequency_min_ratio) & (cum[:-1] >= 0.5 * cum[-1])):
        if k >= 1:
            keep = np.zeros(w.size, dtype=bool)
            keep[order[: k + 1]] = True
            return keep
    return None


def robust_scale(x: np.ndarray, w: np.ndarray, top: float | None = None) -> Scale | None:
    """Median and MAD on the scale that makes the column most symmetric: log when (nearly) every value is
    positive, log1p when none is negative but some are zero, logit for shares bounded by `top`, linear
    otherwise. A transformed scale must be clearly more symmetric than the values as they are."""
    domain = domain_tier(w)
    if domain is not None:
        # A column with a domain of common values is judged against that domain (its spread, or the spacing
        # of its values), not against a tail that noise may have spread over half the rows.
        d, dw = x[domain], w[domain]
        center = weighted_quantile(d, dw, 0.5)
        dev = np.abs(d - center)
        spread = 1.4826 * weighted_quantile(dev, dw, 0.5)
        if spread <= 0 and (dev > 0).any():  # one value holds half the domain: the others' distance from it
            spread = 1.4826 * weighted_quantile(dev[dev > 0], dw[dev > 0], 0.5)
        if spread > 0:
            return Scale("linear", center, spread)
    zeros = float(w[x == 0].sum())
    if zeros >= 0.5 * w.sum() and float(w[x < 0].sum()) <= DEFAULT.offscale_share * w.sum():
        # Zero in most rows (no rain, no spending): the other values are judged among themselves, on the log
        # scale where amounts spread over magnitudes.
        positive = x > 0
        if positive.sum() >= 3:
            t, tw = np.log(x[positive]), w[positive]
            center = weighted_quantile(t, tw, 0.5)
            spread = 1.4826 * weighted_quantile(np.abs(t - center), tw, 0.5)
            if spread > 0:
                return Scale("log0", center, spread)
    kinds = ["linear"]
    # A few values off a transformed scale (noise pasted as negatives) do not rule it out; they are judged
    # by their sign instead (see detect_numeric_outliers).
    if float(w[x < 0].sum()) <= DEFAULT.offscale_share * w.sum():
        kinds.append("log" if w[x <= 0].sum() <= DEFAULT.offscale_share * w.sum() else "log1p")
    if top:
        kinds.append("logit")
    best: Scale | None = None
    best_skew = math.inf
    for kind in kinds:
        probe = Scale(kind, 0.0, 1.0, top or 0.0)
        t = probe.transform(x)
        ok = np.isfinite(t)
        if ok.sum() < 3:
            continue
        t, tw = t[ok], w[ok]
        _, med, _, skew = _bowley(t, tw)
        dev = np.abs(t - med)
        spread = 1.4826 * weighted_quantile(dev, tw, 0.5)
        if spread <= 0:
            # Half the rows share one value (no rain, no visit, a flag's usual state): the spread is that of
            # the other rows around it, so a rainy day is judged among rainy days.
            rest = dev > 0
            spread = 1.4826 * weighted_quantile(dev[rest], tw[rest], 0.5) if rest.any() else 0.0
        if spread <= 0:
            continue
        penalty = 0.0 if kind == "linear" else 0.1
        if abs(skew) + penalty < best_skew:
            best, best_skew = Scale(kind, med, spread, top or 0.0), abs(skew) + penalty
    return best


# A semantic hint a user's data allows: a column called lon, lng or longitude holds degrees around the globe.
LONGITUDE_NAME = re.compile(r"(?i)(?:^|[^a-z])(?:lon|lng|long|longitude)(?:[^a-z]|$)")


def _unwrap(x: np.ndarray) -> np.ndarray:
    """Longitudes cut where the globe is emptiest (the widest gap between them), so that the bulk is one
    run of numbers: airports from Guam to Maine straddle the antimeridian, not 0."""
    u = np.unique(x)
    if u.size < 2:
        return x
    gaps = np.diff(np.r_[u, u[0] + 360.0])
    cut = int(np.argmax(gaps))
    if cut == u.size - 1:
        return x  # the widest gap is across the antimeridian already
    return np.where(x > u[cut], x - 360.0, x)


# Where each tail's spread is read (share of the rows beyond) and where a normal bulk puts those quantiles.
TAIL_LEVELS = ((0.10, 1.2816), (0.05, 1.6449), (0.01, 2.3263))
TAIL_SMOOTH = 1.5  # a tail is smooth when its spread grows by at most this much from one level to the next


def _tail_spreads(scale: Scale, x: np.ndarray, w: np.ndarray) -> Scale:
    """The scale with each tail's own spread where the tail is heavier than the bulk and smoothly so.

    Each tail's spread is read at the 10%, 5% and 1% of the rows beyond it: the spread a normal bulk would
    need to put them there. A real heavy tail (a chronic-disease index whose 99th percentile lies five
    spreads out, growth rates of towns of every size) grows its spread gently from one level to the next,
    and is then judged by its 1% spread: its real extremes stay. Errors make a shoulder instead (a few
    percent of values ten times too big: the spread jumps between two levels), and leave the scale as it
    is. A column with a domain of common values keeps the spread of its domain."""
    if domain_tier(w) is not None:
        return scale
    t = scale.transform(x)
    fin = np.isfinite(t)
    if w[fin].sum() < 100:
        return scale  # too few rows to read a tail at 1%
    tt, tw = t[fin], w[fin]

    def side(sign: float) -> float:
        spreads = [
            sign * (weighted_quantile(tt, tw, 0.5 + sign * (0.5 - share)) - scale.center) / z
            for share, z in TAIL_LEVELS
        ]
        smooth = all(b <= TAIL_SMOOTH * max(a, scale.spread) for a, b in pairwise(spreads))
        return max(spreads[-1], scale.spread) if smooth else scale.spread

    low, high = side(-1.0), side(1.0)
    if low <= scale.spread and high <= scale.spread:
        return scale
    return replace(scale, low_spread=low, high_spread=high)


# Values nearer the bulk than this many robust spreads are never candidates: a bound on the work, not a
# decision (the fitted decision weighs every candidate by how far out it lies).
CANDIDATE_Z = 3.0


def _crowding(scale: Scale, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per distinct value: log of the share of the column's other rows within one spread of it on the
    column's scale (a value alone in its stretch scores log(1 / rows))."""
    t = scale.transform(x)
    ok = np.isfinite(t)
    out = np.full(x.size, math.log(1.0 / max(float(w.sum()), 1.0)))
    if ok.sum() < 2:
        return out
    order = np.argsort(t[ok], kind="stable")
    ts, cum = t[ok][order], np.concatenate([[0.0], np.cumsum(w[ok][order])])
    lo = np.searchsorted(ts, t[ok] - scale.spread, side="left")
    hi = np.searchsorted(ts, t[ok] + scale.spread, side="right")
    near = cum[hi] - cum[lo] - w[ok]  # other rows within one spread
    out[ok] = np.log((near + 1.0) / float(w.sum()))
    return out


TAIL_ROWS = (0.05, 20, 500)  # the extremes a tail's spacings are read on: this share of rows, within bounds
TAIL_TRIM = 0.8  # the tail's scale is the mean of its smaller spacings (the large ones are what is tested)


def _tail_spacing(scale: Scale, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per distinct value: how far it is cut off from the rest of its tail, as the largest normalised spacing
    between it and the bulk over the tail's typical spacing.

    Sorted from the most extreme, the k-th gap of a tail times the k rows beyond it (the normalised spacing)
    is alike all along a smooth tail, whatever its weight (Rényi: exponential order statistics' spacings are
    independent and alike): the extremes of a real heavy tail (a rating on a handful of minutes played) sit
    where the tail leads. A value multiplied by ten, or digits doubled, opens one spacing many times the rest.
    0 for values outside the tail read (the fitted decision weighs the statistic: `x:outliers:spacing`)."""
    out = np.zeros(x.size)
    t = scale.transform(x)
    fin = np.isfinite(t)
    total = float(w[fin].sum())
    if total < 10:
        return out
    share, least, most = TAIL_ROWS
    room = min(max(share * total, least), most)
    for sign in (1.0, -1.0):
        u = sign * (t - scale.center)
        side = np.flatnonzero(fin & (u > 0))
        if side.size < 2:
            continue
        order = side[np.argsort(-u[side], kind="stable")]
        cum = np.cumsum(w[order])
        # The extremes holding `room` rows (four values at least), and the value after them.
        n = min(max(int(np.searchsorted(cum, room)) + 1, 4), order.size)
        if n < 2:
            continue
        top = order[:n]
        gaps = (u[top[:-1]] - u[top[1:]]) * cum[: n - 1]
        if (
            gaps.size >= 3
        ):  # the tested spacings never set their own reference: the largest is always left out
            kept = np.sort(gaps)[: max(1, min(int(TAIL_TRIM * gaps.size), gaps.size - 1))]
            typical = max(float(kept.mean()), 1e-9 * scale.spread, 1e-300)
        else:  # a tail of two or three values (a 1-5 score): the bulk's own spread is the reference
            typical = scale.spread
        beyond = np.maximum.accumulate((gaps / typical)[::-1])[::-1]  # the largest from each value inward
        out[top[:-1]] = beyond
    return out


def detect_numeric_outliers(f: ColumnFacts, m: NumericModel, cal: Calibration = DEFAULT) -> Finding | None:
    """Numbers far from the column's bulk (robust z on its best scale), or negative where it never is."""
    if not m.numeric or m.code_width is not None:
        return None  # codes with leading zeros are judged by their width
    ok = m.is_number
    if m.weights[ok].sum() < 10 or ok.sum() < 3:
        return None
    x, w = m.numbers[ok], m.weights[ok].astype(np.float64)
    circle = LONGITUDE_NAME.search(f.name) is not None and float(x.min()) >= -180 and float(x.max()) <= 180
    scale = robust_scale(_unwrap(x), w) if circle else robust_scale(x, w, share_top(f.name, x, w))
    if scale is not None and scale.kind != "linear":
        circle = False
    llr = np.zeros(x.size)
    z = np.zeros(x.size)
    if scale is not None and not circle:
        scale = _tail_spreads(scale, x, w)
    if scale is not None:
        z = scale.z(x)
        if circle:  # around the globe: 174 E lies 91 degrees from 95 W, not 269
            gap = np.abs(x - scale.center) % 360.0
            z = np.minimum(gap, 360.0 - gap) / scale.spread
        far = (z > cal.outlier_z) & np.isfinite(z)
        if far.any():
            llr[far] = (np.minimum(z[far], 1e6) - cal.outlier_z) * cal.outlier_llr_per_z
            # Cut off from the bulk: an empty stretch of two spreads or more lies between it and the centre.
            order = np.argsort(z, kind="stable")
            zs = np.minimum(z[order], 1e6)
            big = np.zeros(zs.size, dtype=bool)
            big[1:] = (np.diff(zs) >= 2.0) & (zs[:-1] >= 2.0)
            cut = np.zeros(x.size, dtype=bool)
            cut[order] = np.logical_or.accumulate(big)
            llr[far & cut] += cal.outlier_gap_bonus
            # A far value the column repeats as often as its ordinary ones is likelier real (the zip of the one
            # hospital in another state); the dependencies vouch for it as well (see detect.__init__).
            llr[far] -= repeat_discount(w[far], f.typical_count, cal)
    negative = x < 0
    offscale = ~np.isfinite(z)  # zero or below on a log scale: judged by sign, not by distance
    z = np.where(offscale, 0.0, z)
    nonneg_share = float(w[~negative].sum() / w.sum())
    sign_llr = 0.0
    sign_edge = 0.0
    # The sign is a rule of the column only where negatives are as rare as values off a log scale may be: a
    # column with a third of its values negative (a growth rate) has no sign to break.
    if negative.any() and nonneg_share >= 1.0 - cal.offscale_share:
        sign_llr = math.log(nonneg_share / max(1 - nonneg_share, 1e-9)) - math.log(2.0) + cal.sign_bonus
        # A negative just below zero continues a column that comes close to zero (a dew point of -0.5 F in
        # winter, an airport 54 ft below sea level among thousands of feet); only one further below than the
        # column's low positive values, and than a share of its spread, breaks its sign.
        positive = x > 0
        edge = weighted_quantile(x[positive], w[positive], 0.05) if positive.any() else 0.0
        center = weighted_quantile(x, w, 0.5)
        spread = 1.4826 * weighted_quantile(np.abs(x - center), w, 0.5)
        edge = max(edge, cal.sign_edge_spread * spread)
        beyond = negative & (x < -edge)
        sign_edge = float(edge)
        llr[beyond] = np.maximum(llr[beyond], sign_llr)
    elif offscale.any() and scale is not None and scale.kind == "log":
        # A zero in a column of positive quantities: as telling as zeros are rare in it.
        positive = float(w[~offscale].sum() / w.sum())
        llr[offscale] = math.log(positive / max(1 - positive, 1e-9)) - math.log(2.0) + cal.sign_bonus
    if scale is not None and scale.kind == "logit":
        # A share above its whole: as telling as such values are rare in the column (below 0: the sign).
        above = x > scale.top
        if above.any():
            inside = float(w[~above].sum() / w.sum())
            over = math.log(inside / max(1 - inside, 1e-9)) - math.log(2.0) + cal.sign_bonus
            llr[above] = np.maximum(llr[above], over)
    llr = np.minimum(llr, cal.outlier_max_llr)
    # Candidates: evidence pointing to a wrong value, or a value beyond CANDIDATE_Z spreads whose evidence the
    # fitted decision weighs with how far out it is and how crowded its neighbourhood is (a mode of a
    # multi-modal sensor column is crowded; a value multiplied by ten stands alone).
    hit = (llr > 0) | (np.isfinite(z) & (z > CANDIDATE_Z))
    if not hit.any():
        return None
    far = np.log1p(np.minimum(z, 1e6))
    crowd = _crowding(scale, x, w) if scale is not None else np.zeros(x.size)
    spacing = np.log1p(_tail_spacing(scale, x, w)) if scale is not None else np.zeros(x.size)
    ids = m.ids[ok][hit]
    name = f.name
    low, high = scale.bounds(cal.outlier_z) if scale is not None else (None, None)
    if low is not None and not negative.any():
        low = max(low, 0.0)  # a quantity that is never negative has no expected range below zero
    top = share_top(f.name, x, w)
    if high is not None and top is not None:
        high = min(high, top)  # nor a share above its whole
    median = weighted_quantile(x, w, 0.5)

    def describe(fd: Finding) -> str:
        shown = ", ".join(repr(v) for v in fd.stats["bad_values"][:3])
        where = f"{'on a log scale, ' if scale is not None and scale.log else ''}most values lie within "
        bulk = f" ({where}{low:.4g} … {high:.4g}; median {median:.4g})" if low is not None else ""
        return (
            f"{plural(fd.n_cells, 'value')} in '{name}' {agree(fd.n_cells, 'lies', 'lie')} far outside the bulk "
            f"of the column{bulk}, e.g. {shown}."
            + (
                " Some are negative in a column that otherwise never is."
                if sign_llr > 0 and any(v.strip().startswith("-") for v in fd.stats["bad_values"])
                else ""
            )
        )

    return value_finding(
        f,
        ids,
        llr[hit],
        z[hit],
        {"far": far[hit], "crowd": crowd[hit], "spacing": spacing[hit]},
        type="numeric_outlier",
        columns=[name],
        title=f"Extreme values in {name}",
        description="",
        describe=describe,
        suggested_action="Check these values against the source: unit mix-ups, extra or missing digits and "
        "test records are common causes. Correct or exclude them before computing averages.",
        category="smart_fixes",
        detector="outliers",
        stat_name="robust z-score",
        stats={
            "column": name,
            "low": low,
            "high": high,
            "nonnegative": sign_llr > 0,
            "edge": sign_edge,
            "median": median,
            "scale": scale.kind if scale is not None else "linear",
            "top": scale.top if scale is not None and scale.kind == "logit" else None,
            "bad_values": _values(f, ids),
        },
        key=f"outliers:{name}",
    )
