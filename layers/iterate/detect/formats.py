"""Format detectors: values whose shape breaks the column's pattern, numbers carrying units, mixed date formats."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.detect.calibration import DEFAULT, Calibration, repeat_discount, share_llr
from iterate.detect.context import ColumnFacts
from iterate.detect.findings import MAX_LISTED, Finding, cells, value_finding
from iterate.profile._bytes import fast_shapes
from iterate.profile.parse import COMMA_PROOF, decimal_convention, strftime_to_regex
from iterate.profile.shapes import shape_regex
from iterate.wording import agree, plural

# A number, optionally with a currency sign before it and a unit or percent sign after it.
NUM_UNIT = (
    r"^\s*(?P<pre>[$€£¥]?)\s*(?P<num>[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+)"
    r"\s*(?P<unit>[^\d\s](?:[^\d]*[^\d\s])?)?\s*$"
)
NUMERIC_SHAPES = {"9", "9.9", "-9", "-9.9", ".9", "+9", "9,9", "9,9.9"}
PLAIN_NUMBER_SHAPES = {"9", "9.9", "-9", "-9.9", ".9", "-.9", "+9", "+9.9"}

# A number in scientific notation (a mantissa and a power of ten), in each decimal convention; as regexes
# meaning the same in `re` and re2.
SCIENTIFIC_POINT = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+"
SCIENTIFIC_COMMA = r"[-+]?[0-9]+(?:,[0-9]+)?[eE][-+]?[0-9]+"
# Numeric shapes (`9`, `-9.9`, `9.9,9`), and the parts of those with a separator between digits.
NUMBER_SHAPE = re.compile(r"^[-+]?(?:9(?:[.,]9)*|\.9)$")
# The shape of a number in scientific notation (`9.9a-9` for 1.5e-12): a number where the column reads as
# numbers.
SCIENTIFIC_SHAPE = re.compile(r"^[-+]?(?:9(?:[.,]9)?|\.9)a[-+]?9$")
SEPARATED_SHAPE = re.compile(r"^( ?)([-+]?)(9?)((?:[.,]9)+)( ?)$")

# Shares that decide what counts as a pattern and what breaks it.
STRUCTURED_COVERAGE = 0.95  # the top shapes must cover this share of the values ...
STRUCTURED_MAX_SHAPES = 4  # ... with at most this many shapes
# A syntactically ordinary e-mail address (RFC 5322's common subset: no quoted local parts or IP hosts).
EMAIL = r"[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
RARE_SHAPE_SHARE = 0.03  # a shape used by at most this share of the values breaks the pattern
WORDS_ONLY = re.compile(r"^a(?: a)*$")
GROUPED_NUMBER = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_WORD_RUN = re.compile(r"a(?: a)+")  # word shapes: categories and names, whose rare shapes are legitimate
# Shapes (iterate.profile._bytes.fast_shapes) of values NUM_UNIT reads as a bare number, no sign nor unit.
_BARE_SHAPE = re.compile(r"^ ?[-+]?9(?:\.9)? ?$")
UNIT_SPELLING_SHARE = 0.02  # a unit spelling used by at least this share is a real representation
QUANTITY_SHARE = 0.9  # at least this share of values parse as number (+ unit) for a quantity column
# Units, currencies and magnitudes a number is written with (lower case, without a final full stop).
_UNIT_WORDS = (
    "$ € £ ¥ usd eur gbp jpy chf cad aud cny inr % pct percent pc "
    "mg g gr gram grams kg kgs kilo kilos lb lbs pound pounds oz ounce ounces t ton tons tonne tonnes st "
    "nm um µm mm cm dm m km in inch inches \" ft feet foot ' yd yard yards mi mile miles "
    "ml cl dl l lt liter liters litre litres gal gallon gallons qt pt fl oz floz cc m3 m³ ft3 "
    "ms s sec secs second seconds min mins minute minutes h hr hrs hour hours d day days wk week weeks "
    "mo month months y yr yrs year years mph kph km/h kmh m/s kn kt knots "
    "w kw mw gw wh kwh mwh hp bhp ps j kj mj cal kcal v kv mv a ma mah ah hz khz mhz ghz "
    "b kb mb gb tb bit bits kbps mbps gbps °c °f ° c f k bn mn thousand million billion x "
    "sqft m2 m² km2 km² ha acre acres pa kpa hpa mbar bar psi atm mmhg rpm dpi ppm ppb db mol"
)
KNOWN_UNITS = frozenset(_UNIT_WORDS.split())


def _known_unit(spelling: str) -> bool:
    """Whether a spelling `pre|unit` (detect_units) starts with a currency sign or a unit, magnitude or
    percent sign (`$|`, `|oz.`, `|oz. alumi-tek`, `|km/h`), a final full stop left out."""
    pre, _, unit = spelling.partition("|")
    words = unit.split()
    return bool(pre.strip()) or (bool(words) and words[0].rstrip(".") in KNOWN_UNITS)


MAGNITUDES = frozenset({"k", "m", "mm", "mn", "mil", "b", "bn", "thousand", "million", "billion"})


def _fold_magnitude(spelling: str) -> str:
    """`$|m` (a number of millions of dollars) as `$|`: a magnitude after a currency sign is part of the
    number."""
    pre, _, unit = spelling.partition("|")
    return f"{pre}|" if pre.strip() and unit.strip().rstrip(".") in MAGNITUDES else spelling


def _legend(shapes: list[str]) -> str:
    """What the symbols of these shapes stand for, naming only those they use."""
    parts = [
        text
        for symbol, text in (("9", "9 is a run of digits"), ("a", "a a run of letters"))
        if any(symbol in s for s in shapes)
    ]
    return (", where " + " and ".join(parts)) if parts else ""


def _convention_regex(shape: str, convention: str, *, thousands: bool) -> str | None:
    """The values of a separated numeric shape (`9,9.9`) that are numbers in a decimal convention (`comma` or
    `point`), as a regex meaning the same in `re` and re2; None when none are. `thousands`: values with
    thousands separators are allowed (`1.234,5` for `9.9,9` in the comma convention)."""
    m = SEPARATED_SHAPE.match(shape)
    if m is None:
        return None
    lead, sign, first, rest, trail = m.groups()
    dec, sep = (",", ".") if convention == "comma" else (".", ",")
    seps = rest[0::2]
    groups = len(seps) - len(seps.lstrip(sep))
    tail = seps[groups:]
    if tail not in ("", dec) or (groups and not thousands) or (not first and (groups or not tail)):
        return None
    out = r"\s+" if lead else ""
    out += re.escape(sign) + ("[0-9]{1,3}" if groups else "[0-9]+" if first else "")
    out += f"(?:{re.escape(sep)}[0-9]{{3}}){{{groups}}}" if groups else ""
    out += f"{re.escape(dec)}[0-9]+" if tail else ""
    return out + (r"\s+" if trail else "")


BIG_COLUMN = 50_000  # distinct values above which structure is learned on a sample of rows
SAMPLE_ROWS = 50_000


def sample_uniques(f: ColumnFacts, *, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Dictionary positions seen in a sample of rows, and how often (all of them for small columns)."""
    if f.column.n_unique <= BIG_COLUMN:
        ids = np.flatnonzero(f.counts > 0)
        return ids, f.counts[ids]
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(f.column), min(SAMPLE_ROWS, len(f.column)), replace=False)
    ids, counts = np.unique(f.column.codes[rows], return_counts=True)
    return ids, counts


def _fine_shapes(f: ColumnFacts, ids: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The shapes of these dictionary positions in the order they are first seen, and each one's shape code:
    what `pc.dictionary_encode(fast_shapes(dictionary.take(ids)))` gives. Taken from the shapes of the whole
    dictionary (ColumnFacts.shape_codes, which the date check works out first) when the column is not big
    (see sample_uniques), rather than computed a second time."""
    if f.column.n_unique > BIG_COLUMN:
        fine = pc.dictionary_encode(fast_shapes(f.column.dictionary.take(ids)))
        return fine.dictionary.to_pylist(), fine.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    all_codes, all_text = f.shape_codes
    codes = all_codes[ids]
    seen, first = np.unique(codes, return_index=True)
    in_order = seen[np.argsort(first, kind="stable")]
    renumber = np.zeros(len(all_text), dtype=np.int64)
    renumber[in_order] = np.arange(in_order.size)
    return [all_text[int(k)] for k in in_order], renumber[codes]


def detect_shape_violations(f: ColumnFacts) -> Finding | None:
    """Values whose shape is rare in a column where a few shapes cover nearly everything.

    Free text and prose (most values three words or more; see ColumnFacts.free_text, .prose) have no shape
    to break: a sentence is not checked against a pattern.
    """
    if f.n_present < 20 or f.free_text or f.prose or f.list_delimiter is not None:
        return None  # a list's shape is its length: its items are judged as a vocabulary (typos)
    ids, weights_u = sample_uniques(f)
    keep = f.present[ids]
    ids, weights_u = ids[keep], weights_u[keep]
    # Coarse shapes (`a a a` → `a`): worked out once per distinct shape, of which there are few.
    fine_text, fine_codes = _fine_shapes(f, ids)
    merged = [_WORD_RUN.sub("a", str(t)) for t in fine_text]
    shape_text = list(dict.fromkeys(merged))
    position = {t: k for k, t in enumerate(shape_text)}
    codes = np.array([position[t] for t in merged], dtype=np.int64)[fine_codes]
    weights = np.bincount(codes, weights=weights_u, minlength=len(shape_text))
    distinct = np.bincount(codes, minlength=len(shape_text))  # distinct values per shape
    n = float(weights.sum())
    if n == 0:
        return None
    order = np.argsort(-weights, kind="stable")
    top = order[:STRUCTURED_MAX_SHAPES]
    top = top[weights[top] > RARE_SHAPE_SHARE * n]
    if top.size == 0 or weights[top].sum() < STRUCTURED_COVERAGE * n:
        return None
    if WORDS_ONLY.match(shape_text[order[0]]):
        return None  # names and categories: their rare shapes are legitimate (typos are found elsewhere)
    rare = (weights <= RARE_SHAPE_SHARE * n) & (weights * 10 < weights[order[0]])
    accepted = [shape_text[i] for i in order if weights[i] > 0 and (not rare[i] or i in set(top.tolist()))]
    dominant = [shape_text[i] for i in top]
    # Numbers with decimal commas and decimal points share shapes (`3,5` and `1,234` are both `9,9`): when
    # the values prove one convention, separated numbers are judged by it, so the other's are flagged at any
    # share; a rare shape is accepted only for numbers without thousands separators (`512,3` among `1.234,5`).
    extra: tuple[str, ...] = ()
    convention = None
    # A column that pads its numbers (`"25,649     "`, `718     `) writes numbers all the same.
    pads = {(s[: len(s) - len(s.lstrip())], s[len(s.rstrip()) :]) for s in dominant}
    if all(NUMBER_SHAPE.match(s.strip()) for s in dominant):
        # The winning convention's proof must not itself be rare (`12,5` among integers is a shape error).
        values = f.column.dictionary.take(ids)
        convention = decimal_convention(values, weights_u, RARE_SHAPE_SHARE)
        if convention is None and any("," in d for d in dominant):
            # Commas among the usual shapes and none that reads only as a decimal comma: they group thousands.
            proof = pc.match_substring_regex(pc.utf8_trim_whitespace(values), COMMA_PROOF)
            if not pc.any(proof).as_py():
                convention = "point"
    if convention is not None:
        in_top = set(top.tolist())
        # A column that writes thousands separators writes them in its millions too (`2,076,894` among
        # `25,649`): more groups are the same convention.
        grouped = any(
            _convention_regex(d, convention, thousands=False) is None
            and _convention_regex(d, convention, thousands=True) is not None
            for d in dominant
        )
        accepted, judged = [], []
        for i in order:
            if weights[i] <= 0:
                continue
            usual = not rare[i] or i in in_top
            if SEPARATED_SHAPE.match(shape_text[i]):
                judged.append(_convention_regex(shape_text[i], convention, thousands=usual or grouped))
            elif usual:
                accepted.append(shape_text[i])
        extra = tuple(sorted({r for r in judged if r is not None}))
    if all(
        NUMBER_SHAPE.match(s.strip()) or (SCIENTIFIC_SHAPE.match(s.strip()) and f.numeric.numeric)
        for s in dominant
    ):
        # In a column of numbers, whole numbers, decimals and signs are one format (a humidity of 100 among
        # 43.5, a dew point of -2; 718 among 1,352: a number below a thousand has no separator to write):
        # only the separators (decimal comma or point) are a convention to keep.
        plain = PLAIN_NUMBER_SHAPES if convention != "comma" else {"9", "-9", "+9"}
        accepted = sorted(set(accepted) | {lead + p + trail for p in plain for lead, trail in pads})
        # Scientific notation is how R and Python write very small and very round numbers (3e-4, 1e+05,
        # 18e16): the same kind of number, written with the column's decimal separator.
        extra = (*extra, SCIENTIFIC_COMMA if convention == "comma" else SCIENTIFIC_POINT)
    if all("@" in s for s in dominant):
        # An e-mail column: validity is the address grammar, not the shape of its local part (mbates88@
        # and dan_k_wood@ are ordinary addresses beside ann@).
        extra = (*extra, EMAIL)
    engine = "re2-ascii" if f.ascii else "re2"
    matches = pc.match_substring_regex(
        f.column.dictionary, pattern=shape_regex(accepted, words=True, engine=engine, extra=extra)
    )
    bad = ~np.asarray(matches.to_numpy(zero_copy_only=False), dtype=bool) & f.present & (f.counts > 0)
    if not bad.any():
        return None
    ids = np.flatnonzero(bad)
    rows, cols = cells(f.column.rows_of(ids), f.index)
    numeric = all(s in NUMERIC_SHAPES for s in dominant)
    text_in_numbers = numeric and bool(f.has_letter[ids].any())
    kind = "mixed_types" if text_in_numbers else "format_violation"
    # In a column of plain numbers, a number written with thousands separators (`12,500` among `12500`) is
    # the same number written unlike the column: a quick fix rewrites it plainly.
    plain_numbers = all(s.strip() in PLAIN_NUMBER_SHAPES for s in dominant) and convention != "comma"
    texts = f.column.texts(ids)
    rewrite = plain_numbers and all(GROUPED_NUMBER.match(t.strip()) is not None for t in texts)
    expected = None
    if rewrite:
        by_id = {int(i): t.strip().replace(",", "") for i, t in zip(ids.tolist(), texts, strict=True)}
        expected = [by_id[int(c)] for c in f.column.codes[rows]]
    pattern_desc = " or ".join(f"'{s}'" for s in dominant)
    return Finding(
        type=kind,
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=(
            f"Text in the numeric column {f.name}"
            if kind == "mixed_types"
            else f"Values breaking the pattern of {f.name}"
        ),
        description="",
        describe=lambda fd: (
            f"{plural(fd.n_cells, 'value')} in '{f.name}' {agree(fd.n_cells, 'does', 'do')} not follow the "
            f"column's pattern ({pattern_desc}{_legend(dominant)}), which {weights[top].sum() / n:.1%} of its "
            "values follow; "
            f"for example {', '.join(repr(f.column.value(int(r))) for r in fd.rows[:4])}."
            + (f" The column writes decimals with a decimal {convention}." if convention else "")
        ),
        suggested_action=(
            "Write these numbers without thousands separators, as the rest of the column does."
            if rewrite
            else "Correct these values at the source or re-key them in the column's format; values that "
            "cannot be recovered should be set to missing."
        ),
        expected=expected,
        damage="format" if rewrite else "",
        category="smart_fixes" if kind == "mixed_types" and not rewrite else "quick_fixes",
        detector="shape",
        stats={
            "column": f.name,
            "expected_regex": shape_regex(accepted, words=True, extra=extra),
            "missing_markers": sorted(set(f.column.texts(np.flatnonzero(f.is_missing & (f.counts > 0))))),
            "dominant_shapes": dominant,
        },
        key=f"shape:{f.name}",
        # A pattern is learned from distinct values: in a vocabulary of a dozen words (school grades, age
        # bands) every word is its own shape and a rare one says nothing; in a column of thousands of codes
        # that nearly all share a shape, a value that breaks it says a lot.
        llr=share_llr(float(distinct[top].sum() / max(distinct.sum(), 1)), DEFAULT.shape_bonus)
        - repeat_discount(f.counts[f.column.codes[rows]], f.typical_count),
    )


def detect_units(f: ColumnFacts) -> Finding | None:
    """A quantity column whose values carry units (or currency, or %) written in more than one way."""
    present = f.present & (f.counts > 0)
    n = f.n_present
    if n < 20:
        return None
    if f.ascii and f.column.n_unique <= BIG_COLUMN:
        # Two spellings must each hold UNIT_SPELLING_SHARE of the rows, and at most one of them is the bare
        # number: when the values that are surely bare numbers (shape `9`, `-9.9`, ... : RE2's \d is ASCII,
        # as these shapes are here) leave less than that share, no regex needs to run.
        codes, shape_text = f.shape_codes
        bare = np.array([_BARE_SHAPE.match(t) is not None for t in shape_text], dtype=bool)
        if f.counts[present & ~bare[codes]].sum() < UNIT_SPELLING_SHARE * n:
            return None
    ids, weights_u = sample_uniques(f)
    quick = pc.match_substring_regex(f.column.dictionary.take(ids), pattern=NUM_UNIT)
    ok = np.asarray(quick.to_numpy(zero_copy_only=False), dtype=bool) & f.present[ids]
    if weights_u[ok].sum() < QUANTITY_SHARE * weights_u[f.present[ids]].sum():
        return None  # decided on a sample: not a quantity column
    parsed = pc.extract_regex(f.column.dictionary, pattern=NUM_UNIT)
    matched = np.asarray(pc.is_valid(parsed).to_numpy(zero_copy_only=False), dtype=bool) & present
    if f.counts[matched].sum() < QUANTITY_SHARE * n:
        return None
    pre = pc.fill_null(pc.struct_field(parsed, "pre"), "")
    unit = pc.fill_null(pc.struct_field(parsed, "unit"), "")
    spelling = pc.utf8_lower(pc.binary_join_element_wise(pre, unit, "|"))
    enc = pc.dictionary_encode(spelling)
    scodes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    stext = enc.dictionary.to_pylist()
    # After a currency sign, K / M / bn scale the number ($340K, $6M): one currency, not two units.
    folded = [_fold_magnitude(t) for t in stext]
    if folded != stext:
        names = sorted(set(folded))
        scodes = np.array([names.index(t) for t in folded], dtype=np.int64)[scodes]
        stext = names
    weights = np.bincount(scodes[matched], weights=f.counts[matched], minlength=len(stext))
    real = [i for i in range(len(stext)) if weights[i] >= UNIT_SPELLING_SHARE * n]
    if len(real) < 2:
        return None
    plain = stext.index("|") if "|" in stext else -1
    if not all(_known_unit(stext[i]) for i in real if i != plain):
        # A suffix that names no unit: a code of a count and a kind (gears and gearbox: 7a, 8am, 1dd), or the
        # ends of an answer scale ("10 or younger", "21 or older"), not a quantity written with its unit.
        return None
    bad = matched & (scodes != plain)
    # Rare spellings are typos, not representations: the shape and spelling detectors report them.
    bad &= np.isin(scodes, real)
    if not bad.any():
        return None
    ids = np.flatnonzero(bad)
    rows, cols = cells(f.column.rows_of(ids), f.index)
    nums = pc.struct_field(parsed, "num").to_pylist()
    scaled = {i for i, t in enumerate(enc.dictionary.to_pylist()) if _fold_magnitude(t) != t}
    raw_codes = enc.indices.to_numpy(zero_copy_only=False)
    # A number written with a magnitude ($6M) has no bare form to offer without multiplying it out.
    expected_by_id = {int(i): None if int(raw_codes[i]) in scaled else nums[i].replace(",", "") for i in ids}
    expected = [expected_by_id[int(f.column.codes[r])] for r in rows]
    spell = sorted({stext[i].strip("|").replace("|", " ").strip() for i in real if i != plain})
    return Finding(
        type="unit_in_number",
        damage="format",
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=f"Numbers written with units in {f.name}",
        description="",
        describe=lambda fd: (
            f"{plural(fd.n_cells, 'value')} in '{f.name}' {agree(fd.n_cells, 'carries', 'carry')} a unit or sign "
            "next to the number "
            f"({', '.join(repr(s) for s in spell)}), and the column writes it in {len(real)} different ways; "
            "they cannot be summed or compared until the number is separated from the unit."
        ),
        suggested_action="Keep only the number in this column (and put the unit in the column name), "
        "e.g. '12.0 oz' → 12.0.",
        category="quick_fixes",
        detector="units",
        stats={
            "column": f.name,
            "bad_values": sorted(set(f.column.texts(ids)))[:MAX_LISTED],
            "units": spell,
        },
        expected=expected,
        key=f"units:{f.name}",
    )


DATE_FORMATS = (
    "%Y-%m-%d", "%Y/%m/%d", "%d/%m/%Y", "%m/%d/%Y", "%d-%m-%Y", "%m-%d-%Y", "%d.%m.%Y", "%Y%m%d",
    "%d %b %Y", "%b %d, %Y", "%B %d, %Y", "%d %B %Y", "%m/%d/%y", "%d/%m/%y",
    "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%m/%d/%Y %H:%M",
    "%m/%d/%Y %I:%M %p", "%d/%m/%Y %I:%M %p", "%Y-%m-%d %I:%M %p", "%I:%M %p", "%I:%M%p", "%H:%M",
)  # fmt: skip
# The layout of each format, as a regex a value must match before it is parsed with the format.
_LAYOUTS = [str(strftime_to_regex(fmt)) for fmt in DATE_FORMATS]
DATE_SHAPE = re.compile(
    r"^(?:9[-/. ]9[-/. ]9|9 a 9|a 9, 9|9|9-9-9a9:9:9|9-9-9 9:9(?::9)?|9/9/9 9:9"
    r"|(?:9[-/]9[-/]9 )?9:9(?::9)? ?a(?:\.a\.)?|9:9)$"
)


@dataclass
class DateParse:
    """A date column's distinct present values, read with the recognised formats."""

    present: np.ndarray  # ids of the distinct present values
    values: Any  # a pandas Series of their trimmed text (pandas is imported only when dates are parsed)
    fmt_of: np.ndarray  # per value: index into DATE_FORMATS of the first format it parses in, or -1
    laid_out: np.ndarray  # per value: laid out like some format (digits where its fields go)


def date_parse(f: ColumnFacts) -> DateParse | None:
    """Parse a column that looks like dates or times (None when it does not); see ColumnFacts.dates."""
    present = np.flatnonzero(f.present & (f.counts > 0))
    if f.n_present < 20 or present.size > 50_000:
        return None
    codes, shape_text = f.shape_codes
    # A run of digits alone is a date only written as YYYYMMDD (eight digits): ids and counts are not.
    head = [int(i) for i in present[:50]]
    if not any(
        DATE_SHAPE.match(shape_text[codes[i]])
        and (shape_text[codes[i]] != "9" or len(f.column.texts([i])[0].strip()) == 8)
        for i in head
    ):
        return None
    import pandas as pd

    text = pc.utf8_trim_whitespace(f.column.dictionary.take(pa.array(present, pa.int64())))
    values = pd.Series(text.to_pylist())
    fmt_of = np.full(present.size, -1)
    laid_out = np.zeros(present.size, dtype=bool)
    open_ = np.arange(present.size)  # values no format has read yet: only they can change below
    for k, fmt in enumerate(DATE_FORMATS):
        if open_.size == 0:
            break
        # Only values laid out like the format (a cheap regex) are parsed with it. A value read by an earlier
        # format is laid out already and keeps its format: the regex looks at the others only.
        candidates = text if open_.size == present.size else text.take(pa.array(open_))
        laid_open = np.asarray(
            pc.match_substring_regex(candidates, pattern=_LAYOUTS[k], ignore_case=True).to_numpy(
                zero_copy_only=False
            ),
            dtype=bool,
        )
        laid = np.zeros(present.size, dtype=bool)
        laid[open_[laid_open]] = True
        laid_out |= laid
        todo = laid & (fmt_of < 0)
        if not todo.any():
            continue
        ok = pd.to_datetime(values[todo], format=fmt, errors="coerce").notna().to_numpy()
        fmt_of[np.flatnonzero(todo)[ok]] = k
        open_ = open_[fmt_of[open_] < 0]
    return DateParse(present, values, fmt_of, laid_out)


# The end of a day, which ISO 8601 writes as 24:00 (a time of day, not an error).
_END_OF_DAY = re.compile(r"(?:^|[ T])24:00(?::00)?$")


def detect_impossible_dates(f: ColumnFacts, cal: Calibration = DEFAULT) -> Finding | None:
    """Values laid out as the column's dates or times that no calendar or clock has (2021-02-30, 24:30,
    12:75): validity by parsing, judged like numbers that do not read as numbers."""
    parsed = f.dates
    if parsed is None:
        return None
    bad = parsed.laid_out & (parsed.fmt_of < 0)
    if bad.any():
        end_of_day = np.array([bool(_END_OF_DAY.search(str(v))) for v in parsed.values], dtype=bool)
        bad = bad & ~end_of_day
    if not bad.any():
        return None
    counts = f.counts[parsed.present]
    share = float(counts[parsed.fmt_of >= 0].sum()) / max(float(counts[parsed.laid_out].sum()), 1.0)
    if share < cal.parse_min_share:
        return None  # most of them do not read as dates either: not a date column (durations, codes)
    ids = parsed.present[bad]
    llr = share_llr(share, cal.parse_bonus) - repeat_discount(f.counts[ids], f.typical_count, cal)
    formats = sorted({DATE_FORMATS[k] for k in parsed.fmt_of[parsed.fmt_of >= 0]})
    name = f.name
    return value_finding(
        f,
        ids,
        np.broadcast_to(llr, ids.shape).astype(np.float64),
        np.full(ids.size, share),
        type="out_of_domain",
        columns=[name],
        stat_name="share of the column's dates and times that are real ones",
        title=f"Impossible dates or times in {name}",
        description="",
        describe=lambda fd: (
            f"{plural(fd.n_cells, 'value')} in '{name}' {agree(fd.n_cells, 'is', 'are')} laid out as its dates or "
            "times but name no real day or "
            f"time of day (e.g. {', '.join(repr(v) for v in fd.stats['bad_values'][:3])}), while {share:.1%} of "
            "its dates and times are real ones."
        ),
        suggested_action="Check these with the source and correct them; set them to missing where the right "
        "value cannot be found.",
        category="smart_fixes",
        detector="parse",
        stats={
            "column": name,
            "rule": "date",
            "formats": formats,
            "bad_values": sorted(set(f.column.texts(ids)))[:MAX_LISTED],
        },
        key=f"impossible-dates:{name}",
    )


def detect_date_formats(f: ColumnFacts) -> Finding | None:
    """A date column written in several formats: the minority formats are flagged."""
    parsed = f.dates
    if parsed is None:
        return None
    import pandas as pd

    present, values, fmt_of = parsed.present, parsed.values, parsed.fmt_of
    weights = np.bincount(
        fmt_of[fmt_of >= 0], weights=f.counts[present][fmt_of >= 0], minlength=len(DATE_FORMATS)
    )
    if weights.sum() < 0.9 * f.n_present or (weights > 0).sum() < 2:
        return None
    # Ambiguous day/month values fit several formats: assign them to the dominant one when they fit it.
    main = int(np.argmax(weights))
    main_ok = pd.to_datetime(values, format=DATE_FORMATS[main], errors="coerce").notna().to_numpy()
    bad_local = (fmt_of >= 0) & ~main_ok
    if not bad_local.any():
        return None
    ids = present[bad_local]
    rows, cols = cells(f.column.rows_of(ids), f.index)
    others = sorted({DATE_FORMATS[k] for k in fmt_of[bad_local]})
    # Times of day alone (7:10 PM beside 7:10pm) cannot swap a day and a month.
    dated = any("%d" in DATE_FORMATS[k] for k in {main, *fmt_of[bad_local].tolist()})
    noun = "dates" if dated else "times"
    return Finding(
        type="format_violation",
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=f"{noun.capitalize()} in several formats in {f.name}",
        description="",
        describe=lambda fd: (
            f"'{f.name}' writes most {noun} as {DATE_FORMATS[main]}, but {fd.n_cells:,} values use "
            f"{', '.join(others)}" + ("; day and month may be read the wrong way round." if dated else ".")
        ),
        suggested_action=f"Rewrite every date in one format ({DATE_FORMATS[main]} or ISO 8601).",
        category="quick_fixes",
        detector="dates",
        damage="format",
        stats={
            "column": f.name,
            "bad_values": sorted(set(f.column.texts(ids)))[:MAX_LISTED],
            "main_format": DATE_FORMATS[main],
            "other_formats": others,
        },
        key=f"dates:{f.name}",
    )
