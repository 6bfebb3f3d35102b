"""Offline investigation agent: one pandas template per issue type that recomputes the detector's claim from `df`."""

from __future__ import annotations

import base64
import json
import zlib

from iterate.contracts import READ_LEVEL_TYPES, CodeInvestigation, DatasetProfile, Issue

# Read-level issues (the reader repaired the file) cannot be re-proven from the loaded frame.

# Shared by every template: where the parameters come from and how examples and the result are built.
PRELUDE = '''\
import json
import re

import numpy as np
import pandas as pd

PARAMS = {params}
ROWS = len(df)
NAMES = list(df.columns)
# Cells another, more specific issue already explains: the detector left them out, so does the recount.
EXCLUDED = list(PARAMS.get("excluded_values", []))
TEXT = {{}}  # the columns col() has converted to text already


def col(name):
    """The column as text, by position so duplicate names stay addressable (converted once)."""
    if name not in TEXT:
        TEXT[name] = df.iloc[:, NAMES.index(name)].astype(str)
    return TEXT[name]


def encode(values):
    """Integer codes of the rows and the distinct values they stand for (a missing value is one of them).

    Work done once per distinct value reaches the rows as `per_value[codes]`: on a long column with few
    distinct values that is far cheaper than doing it on every row.
    """
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    return codes, pd.Series(uniques)


def left_out(values, coded=None):
    """Cells the detector leaves out: explained by a more specific issue, or equal to their row's derivation.

    `coded`: the values' (codes, uniques) from encode(), when at hand: each distinct value is then looked up
    once instead of once per row.
    """
    if coded is None:
        out = values.isin(EXCLUDED).to_numpy(dtype=bool)
    else:
        out = coded[1].isin(EXCLUDED).to_numpy(dtype=bool)[coded[0]]
    rule = PARAMS.get("derivation")
    if rule:
        out = out | (values == col(rule["left"]) + rule["separator"] + col(rule["right"])).to_numpy(dtype=bool)
    return out


def examples(mask, name):
    rows = np.flatnonzero(np.asarray(mask, dtype=bool))[:10]
    values = col(name)
    return [{{"row": int(r), "column": name, "value": str(values.iloc[int(r)])}} for r in rows]


def summary(row_mask, cells, name, **extra):
    affected = int(np.asarray(row_mask, dtype=bool).sum())
    out = {{
        "affected_rows": affected,
        "affected_cells": int(cells),
        "share": (affected / ROWS) if ROWS else 0.0,
        "examples": examples(row_mask, name),
    }}
    out.update(extra)
    return out

'''

MARKERS = """\
name = PARAMS["column"]
values = col(name)
markers = {str(m).strip().casefold() for m in PARAMS["markers"]}
stripped = values.str.strip()
# casefold() runs in Python, so it is applied to distinct values only, and only to those short enough to be
# a marker once folded (folding never makes text shorter).
longest = max((len(m) for m in markers), default=-1)
short = stripped[stripped.str.len() <= longest].unique().tolist()
mask = stripped.isin([v for v in short if v.casefold() in markers])
# Rows where a partner column is missing too belong to a pattern of the record, reported on its own.
tokens = {str(m).strip().casefold() for m in PARAMS.get("missing_markers", [])}
for partner in PARAMS.get("partners", []):
    other = col(partner).str.strip()
    mask = mask & ~other.isin([v for v in other.unique().tolist() if v.casefold() in tokens])
found = values[mask].value_counts().head(20)
result = summary(mask, mask.sum(), name, column=name, by_value={str(k): int(v) for k, v in found.items()})
"""

TWINS = """\
# iterate: columns read on demand
def twins(positions, rows, normal=None):
    \"\"\"The rows (of `rows`) equal to another of them on every column given, and a key per group of equal rows.

    Columns are read one at a time as integer codes, one per distinct value (after `normal`, worked out once
    per distinct value, when given), and folded into one integer key per row. Once the keys could take many
    more values than there are rows, they are renumbered and rows left without a twin are dropped: the
    columns after that are only read on the rows still in the running. Columns with few distinct values (in
    the first rows) go first, as they are the cheapest to read; the order never changes the answer.
    \"\"\"
    variety = {i: df.iloc[:1000, i].astype(str).nunique() for i in positions}
    order = sorted(positions, key=lambda i: variety[i])
    key = np.zeros(len(rows), dtype=np.int64)
    span = 1  # every key is below this
    for i in order:
        if not isinstance(df, pd.DataFrame):  # the sandbox's column reader: codes from the file's dictionary pages
            codes, uniques = df.factorized(i, slice(None) if len(rows) == ROWS else rows)
        else:
            values = df.iloc[:, i] if len(rows) == ROWS else df.iloc[rows, i]
            codes, uniques = pd.factorize(values.astype(str), use_na_sentinel=False)
        if normal is not None:
            normal_codes, uniques = pd.factorize(normal(uniques), use_na_sentinel=False)
            codes = normal_codes[codes]
        key = key * len(uniques) + codes
        span *= len(uniques)
        if span > 16 * len(rows) or i == order[-1]:
            key, keys = pd.factorize(key)
            span = len(keys)
            twin = np.bincount(key, minlength=span)[key] > 1
            rows, key = rows[twin], key[twin]
    return rows, key


"""

DUPLICATES_BODY = """\
columns = PARAMS["columns"]
rows, key = twins([NAMES.index(c) for c in columns], np.arange(ROWS))
mask = np.zeros(ROWS, dtype=bool)
mask[rows[pd.Series(key).duplicated(keep="first").to_numpy()]] = True
groups = int(np.unique(key).size)
result = summary(mask, mask.sum() * len(columns), columns[0], groups=groups)
"""

NEAR_DUPLICATES_BODY = """\
columns = PARAMS["columns"]


def near(values):
    # Lower case, every run of characters other than ASCII letters, digits and "_" becomes one space.
    return pd.Series(values, dtype=str).str.lower().str.replace(r"[^0-9A-Za-z_]+", " ", regex=True).str.strip()


# Rows equal to an earlier one once normalised, on the columns given (identifiers left out).
rows, key = twins([NAMES.index(c) for c in columns], np.arange(ROWS), normal=near)
later = rows[pd.Series(key).duplicated(keep="first").to_numpy()]
# Exact copies on every column are the duplicate-rows issue; any exact twin is also a near one, so they
# are all among these rows.
exact_rows, exact_key = twins(range(len(NAMES)), rows)
copies = exact_rows[pd.Series(exact_key).duplicated(keep="first").to_numpy()]
mask = np.zeros(ROWS, dtype=bool)
mask[later] = True
mask[copies] = False
result = summary(mask, mask.sum() * len(columns), columns[0])
"""

DUPLICATES = TWINS + DUPLICATES_BODY
NEAR_DUPLICATES = TWINS + NEAR_DUPLICATES_BODY

PATTERN = """\
name = PARAMS["column"]
values = col(name)
missing = set(PARAMS.get("missing_markers", []))
regex = PARAMS.get("expected_regex")
pattern = re.compile(regex) if regex else None
rule = "expected_regex" if regex else "bad_values"


def judged(texts):
    \"\"\"Which of these texts are present (not blank, not a missing marker) and break the rule.\"\"\"
    stripped = texts.str.strip()
    present = ((stripped != "") & ~stripped.isin(missing)).to_numpy(dtype=bool)
    if pattern is None:
        return present & texts.isin(list(PARAMS["bad_values"])).to_numpy(dtype=bool)
    return present & ~np.array([pattern.fullmatch(str(u)) is not None for u in texts.tolist()], dtype=bool)


def in_slices(texts):
    \"\"\"judged(), 65,536 texts at a time: a long column's millions are never all Python strings at once.\"\"\"
    parts = [judged(texts.iloc[start : start + 65536]) for start in range(0, len(texts), 65536)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


# How many distinct values the column holds, estimated from a sample spread over it by the values seen once and
# twice there (Chao's estimator, which errs low: a few very common values, blanks say, do not sway it).
counts = values.iloc[:: max(ROWS // 65536, 1)].value_counts()
once, twice = int((counts == 1).sum()), int((counts == 2).sum())
distinct = len(counts) + (once * once / (2 * twice) if twice else once * (once - 1) / 2)
if pattern is not None and distinct * 2 > ROWS:
    # Mostly distinct values (phone numbers, ids) are judged row by row: encoding them first would hold a hash
    # table and a second copy of their text (1.2 GB more on 10M phone numbers) to save nothing.
    mask = in_slices(values) & ~left_out(values)
else:
    # Each distinct value is judged once; the verdicts reach the rows through their codes.
    codes, uniques = encode(values)
    mask = in_slices(uniques)[codes] & ~left_out(values, (codes, uniques))
found = values[mask].value_counts().head(20)
result = summary(mask, mask.sum(), name, column=name, rule=rule, by_value={str(k): int(v) for k, v in found.items()})
"""

BAD_VALUES = """\
name = PARAMS["column"]
values = col(name)
mask = values.isin(list(PARAMS["bad_values"])).to_numpy(dtype=bool) & ~left_out(values)
found = values[mask].value_counts().head(20)
result = summary(mask, mask.sum(), name, column=name, by_value={str(k): int(v) for k, v in found.items()})
"""

OUTLIER = """\
name = PARAMS["column"]
values = col(name)
# Each distinct value is parsed and judged once; the verdicts reach the rows through their codes.
codes, uniques = encode(values)
text = uniques.astype(str).str.strip()
listed = uniques.isin(list(PARAMS.get("bad_values", []))).to_numpy(dtype=bool)
numbers = pd.to_numeric(text.where(listed, ""), errors="coerce")
low, high, kind = PARAMS.get("low"), PARAMS.get("high"), PARAMS.get("scale", "linear")
outside = np.zeros(len(uniques), dtype=bool)
if low is not None and high is not None:
    outside = ((numbers < float(low)) | (numbers > float(high))).to_numpy(dtype=bool)
if kind == "log":
    outside = outside | (numbers <= 0).to_numpy(dtype=bool)  # no positive quantity is zero or below
elif kind == "log1p":
    outside = outside | (numbers < 0).to_numpy(dtype=bool)  # no count is negative
elif kind == "log0":
    # Zero is the column's usual value; the others are judged among themselves, and none is negative.
    outside = (outside & (numbers != 0).to_numpy(dtype=bool)) | (numbers < 0).to_numpy(dtype=bool)
if PARAMS.get("nonnegative"):
    outside = outside | (numbers < -float(PARAMS.get("edge", 0.0))).to_numpy(dtype=bool)
holds = listed & outside & numbers.notna().to_numpy(dtype=bool)
mask = holds[codes] & ~left_out(values, (codes, uniques))
flagged = numbers.iloc[codes[mask]]
result = summary(
    mask,
    mask.sum(),
    name,
    column=name,
    low=low,
    high=high,
    scale=kind,
    values_listed=int(listed.sum()),
    values_outside=int(holds.sum()),
    min_flagged=float(flagged.min()) if len(flagged) else None,
    max_flagged=float(flagged.max()) if len(flagged) else None,
)
"""

VALUE_RULE = """\
name = PARAMS["column"]
values = col(name)
rule = PARAMS["rule"]
# Each listed value is judged once by the rule it was flagged under; the verdicts reach the rows by code.
codes, uniques = encode(values)
text = uniques.astype(str).str.strip()
listed = uniques.isin(list(PARAMS.get("bad_values", []))).to_numpy(dtype=bool)
if rule == "number":
    # Does the value read as a number with nothing left over (thousands groups allowed)?
    plain = text.str.fullmatch(r"[-+]?(?:[0-9]+[.]?[0-9]*|[.][0-9]+)(?:[eE][-+]?[0-9]+)?")
    grouped = text.str.fullmatch(r"[-+]?[0-9]{1,3}(?:,[0-9]{3})+(?:[.][0-9]+)?")
    comma = text.str.fullmatch(r"[-+]?(?:[0-9]{1,3}(?:[.][0-9]{3})+|[0-9]+)(?:,[0-9]+)?")
    reads = plain | grouped | (comma if PARAMS.get("convention") == "comma" else False)
    holds = ~reads.fillna(False).to_numpy(dtype=bool)
elif rule == "decimals":
    # Decimals written, once binary floating-point noise (6.904679999999999) is rounded away.
    def written(v):
        if "." not in v or "e" in v.lower():
            return 0
        digits = len(v.split(".")[1])
        if digits >= 8:
            short = "%.12g" % float("%.12g" % float(v))
            digits = len(short.split(".")[1]) if "." in short and "e" not in short else 0
        return digits
    minimum = int(PARAMS["min_decimals"])
    holds = np.array([bool(k) and written(v) >= minimum for v, k in zip(text.tolist(), listed.tolist())], dtype=bool)
elif rule == "digits":
    # Significant digits written, once binary floating-point noise (1.6021766340000001e-19) is rounded away.
    def significant(v):
        try:
            mantissa = "%.11e" % float(v.replace(",", ""))
        except ValueError:
            return 0
        return max(len(mantissa.split("e")[0].lstrip("-").replace(".", "").rstrip("0")), 1)
    minimum = int(PARAMS["min_digits"])
    holds = np.array([bool(k) and significant(v) >= minimum for v, k in zip(text.tolist(), listed.tolist())], dtype=bool)
elif rule == "width":
    holds = (text.str.lstrip("+-").str.len() != int(PARAMS["width"])).to_numpy(dtype=bool)
elif rule == "integer_written":
    holds = text.str.fullmatch(r"[-+]?[0-9]+[.]0+").fillna(False).to_numpy(dtype=bool)
elif rule == "thousands_written":
    # Four digits or more, written with a separator where the column writes none (or the reverse).
    grouped = text.str.fullmatch(r"[-+]?[0-9]{1,3}(?:,[0-9]{3})+(?:[.][0-9]+)?").fillna(False)
    plain = text.str.fullmatch(r"[-+]?[0-9]{4,}(?:[.][0-9]+)?").fillna(False)
    holds = (grouped if PARAMS["separated"] else plain).to_numpy(dtype=bool)
elif rule == "zero_led":
    holds = text.str.fullmatch(r"[-+]?0[0-9]+").fillna(False).to_numpy(dtype=bool)
elif rule == "short_decimals":
    written = text.str.extract(r"^[-+]?[0-9]*[.]([0-9]+)$")[0].str.len().fillna(0)
    holds = (text.str.fullmatch(r"[-+]?[0-9]*[.]?[0-9]+").fillna(False) & (written < int(PARAMS["decimals"]))).to_numpy(dtype=bool)
elif rule == "date":
    # Laid out as the column's dates or times, yet none of its formats reads it as a real day or time.
    real = np.zeros(len(text), dtype=bool)
    for fmt in PARAMS["formats"]:
        real |= pd.to_datetime(text, format=fmt, errors="coerce").notna().to_numpy(dtype=bool)
    holds = ~real
elif rule == "rare":
    counts = np.bincount(codes, minlength=len(uniques))
    holds = counts * float(PARAMS.get("min_ratio", 5.0)) <= float(PARAMS["typical_count"])
elif rule == "word_slip":
    # The column's words (runs of letters), counted over its distinct filled values: a listed word must be
    # rare there, its reference established and far more frequent, the two one slip apart.
    markers = {str(m).strip().casefold() for m in PARAMS.get("missing_markers", [])}
    counts = np.bincount(codes, minlength=len(uniques))
    def words(text):
        # Runs of letters: every other character (digit, punctuation, space, mark) ends a word.
        return "".join(ch if ch.isalpha() else " " for ch in text).split()

    words_of = [words(str(u)) if c > 0 and str(u).strip().casefold() not in markers else [] for u, c in zip(uniques.tolist(), counts.tolist())]
    df, form_df = {}, {}
    for ws in words_of:
        for w in ws:
            df[w.casefold()] = df.get(w.casefold(), 0) + 1
            form_df[w] = form_df.get(w, 0) + 1
    rare, established = int(PARAMS["rare"]), int(PARAMS["established"])

    def ratio(length):
        return 20.0 if length <= 3 else 8.0 if length <= 5 else 3.0

    def one_slip(a, b):
        # One character swapped with its neighbour, dropped, added or replaced (and not a plural s).
        if len(a) == len(b):
            diff = [i for i in range(len(a)) if a[i] != b[i]]
            return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
        longer, shorter = (a, b) if len(a) > len(b) else (b, a)
        if len(longer) != len(shorter) + 1 or longer == shorter + "s":
            return False
        return any(longer[:i] + longer[i + 1:] == shorter for i in range(len(longer)))

    slips = PARAMS.get("slips", {})
    holds = np.zeros(len(uniques), dtype=bool)
    for i in np.flatnonzero(listed):
        written, reference, kind = slips.get(str(uniques.iloc[i]), ["", "", ""])
        ws = words_of[i]
        if kind == "space":
            (a, b), (x, y) = written.split(" "), reference.split(" ")
            adjacent = any(ws[k] == a and ws[k + 1] == b for k in range(len(ws) - 1)) and written in str(uniques.iloc[i])
            moved = (a + b).casefold() == (x + y).casefold() and abs(len(a) - len(x)) == 1
            holds[i] = adjacent and moved and min(df.get(a.casefold(), 0), df.get(b.casefold(), 0)) <= rare and min(df.get(x.casefold(), 0), df.get(y.casefold(), 0)) >= established
        elif kind == "case":
            held = len(written) > 2 and written[:2].isupper() and written[2:].islower()
            holds[i] = written in ws and held and written.casefold() == reference.casefold() and form_df.get(written, 0) <= rare and form_df.get(reference, 0) >= ratio(len(written)) * form_df.get(written, 0)
        else:
            w, r = written.casefold(), reference.casefold()
            need = max(established, ratio(len(w)) * df.get(w, 0))
            holds[i] = written in ws and df.get(w, 0) <= rare and df.get(r, 0) >= need and one_slip(w, r)
else:
    holds = np.ones(len(uniques), dtype=bool)
holds = listed & np.asarray(holds, dtype=bool)
mask = holds[codes] & ~left_out(values, (codes, uniques))
found = values[mask].value_counts().head(20)
result = summary(
    mask,
    mask.sum(),
    name,
    column=name,
    rule=rule,
    values_listed=int(listed.sum()),
    values_holding=int(holds.sum()),
    by_value={str(k): int(v) for k, v in found.items()},
)
"""

ROWS_RULE = """\
rows = np.array([int(r) for r in PARAMS["rows"] if 0 <= int(r) < ROWS], dtype=np.int64)
rule = PARAMS["rule"]
listed = np.zeros(ROWS, dtype=bool)
listed[rows] = True
tokens = {str(m).strip().casefold() for m in PARAMS.get("missing_markers", [""])}


def present(name):
    values = col(name).str.strip()
    blank = values.isin([v for v in values.unique().tolist() if v.casefold() in tokens])
    return ~blank.to_numpy(dtype=bool)


def group_disagrees(x_name, y_name):
    # Rows whose group (same x) holds another y as well: the entity's rows do not agree on y. x is a column,
    # or a list of columns read together (a team's city is its stadium's city): a group is one combination.
    x_names = [x_name] if isinstance(x_name, str) else list(x_name)
    parts = pd.DataFrame({str(i): encode(col(x))[0] for i, x in enumerate(x_names)})
    x_codes = parts.groupby(list(parts.columns), sort=False).ngroup().to_numpy(dtype=np.int64)
    y_codes, _ = encode(col(y_name))
    both = present(y_name)
    for x in x_names:
        both = both & present(x)
    pairs = pd.DataFrame({"x": x_codes[both], "y": y_codes[both]}).drop_duplicates()
    varied = np.zeros(int(x_codes.max()) + 1 if ROWS else 0, dtype=bool)
    counts = pairs.groupby("x").size()
    varied[counts.index[counts.to_numpy() > 1].to_numpy()] = True
    return both & varied[x_codes]


if rule == "missing":
    name = PARAMS["column"]
    holds = ~present(name)
elif rule == "missing_row":
    # A row lacking at least `min_missing` of the columns at once.
    name = PARAMS["columns"][0]
    gaps = np.zeros(ROWS, dtype=np.int64)
    for column in PARAMS["columns"]:
        gaps = gaps + ~present(column)
    holds = gaps >= int(PARAMS["min_missing"])
elif rule == "consensus":
    name = PARAMS["rhs"]
    holds = np.zeros(ROWS, dtype=bool)
    for x_name in PARAMS["determinants"]:
        holds = holds | group_disagrees(x_name, name)
elif rule == "determinant":
    name = PARAMS["lhs"]
    against = np.zeros(ROWS, dtype=np.int64)
    for y_name in PARAMS["dependents"]:
        against = against + group_disagrees(name, y_name)
    holds = against >= 2
elif rule == "sequence":
    # A row the sequence runs through whose value keeps the step with none of the rows around it.
    name = PARAMS["column"]
    text = col(name).str.strip()
    numbers = pd.to_numeric(text.where(text.str.fullmatch(PARAMS["number_regex"]).fillna(False)), errors="coerce")
    values = numbers.to_numpy(dtype=float)
    step = float(PARAMS["step"])
    tolerance = float(PARAMS["tolerance"]) * abs(step)
    reach = int(PARAMS["reach"])
    anchored = np.zeros(ROWS, dtype=bool)  # keeps the step with a row within reach
    through = np.zeros(ROWS, dtype=bool)  # a row before and a row after keep the step with each other
    with np.errstate(invalid="ignore"):
        for k in range(1, min(reach, ROWS - 1) + 1):
            keeps = np.abs(values[k:] - values[:-k] - k * step) <= tolerance
            anchored[k:] |= keeps
            anchored[:-k] |= keeps
        for before in range(1, reach + 1):
            for after in range(1, reach + 1):
                if before + after < ROWS:
                    keeps = np.abs(values[before + after:] - values[:-(before + after)] - (before + after) * step) <= tolerance
                    through[before : ROWS - after] |= keeps
    holds = np.isfinite(values) & through & ~anchored
elif rule == "neighbours":
    # A row whose value none of the rows around it hold, while a clear majority of them agree on another
    # that the column's frequencies would rarely give them by chance.
    import math

    name = PARAMS["column"]
    reach, need, chance = int(PARAMS["reach"]), int(PARAMS["min_agree"]), float(PARAMS["chance"])
    codes, _ = encode(col(name))
    codes = np.where(present(name), codes, -1).astype(np.int64)
    shifted = []
    for s in list(range(-reach, 0)) + list(range(1, reach + 1)):
        x = np.full(ROWS, -1, dtype=np.int64)
        if s < 0 and ROWS > -s:
            x[-s:] = codes[:s]
        elif s > 0 and ROWS > s:
            x[:-s] = codes[s:]
        shifted.append(x)
    mode = np.full(ROWS, -1, dtype=np.int64)
    count = np.zeros(ROWS, dtype=np.int64)
    voters = np.zeros(ROWS, dtype=np.int64)
    for x in shifted:
        voters = voters + (x >= 0)
    for t in shifted:
        same = np.where(t >= 0, sum((x == t).astype(np.int64) for x in shifted), 0)
        mode = np.where(same > count, t, mode)
        count = np.maximum(same, count)
    counts = np.bincount(codes[codes >= 0], minlength=int(codes.max()) + 1 if ROWS else 0)
    p = counts[np.maximum(mode, 0)] / max(int(counts.sum()), 1) if counts.size else np.zeros(ROWS)
    tail = np.zeros(ROWS)
    for j in range(2 * reach + 1):
        ways = np.array([math.comb(m, j) if j <= m else 0 for m in range(2 * reach + 1)], dtype=float)
        tail = tail + np.where((j >= count) & (j <= voters), ways[voters] * p**j * (1 - p) ** np.maximum(voters - j, 0), 0.0)
    holds = (codes >= 0) & (mode >= 0) & (count >= need) & (tail < chance) & (codes != mode)
    if PARAMS.get("number_regex"):
        # The same number written another way is one value.
        text = col(name).str.strip()
        numbers = pd.to_numeric(text.where(text.str.fullmatch(PARAMS["number_regex"]).fillna(False)), errors="coerce").to_numpy(dtype=float)
        by_code = np.full(max(int(codes.max()) + 1, 1), np.nan)
        by_code[codes[codes >= 0]] = numbers[codes >= 0]
        expected = by_code[np.maximum(mode, 0)]
        with np.errstate(invalid="ignore"):
            same_number = np.abs(numbers - expected) <= float(PARAMS["tolerance"]) * np.maximum(np.abs(numbers), np.abs(expected))
        holds = holds & ~same_number
elif rule == "arithmetic":
    # Rows where the column's arithmetic with other columns breaks (a total and its parts, a rate and what it
    # is computed from), by more than rounding the numbers as written allows.
    name = PARAMS["column"]

    def written(n):
        text = col(n).str.strip()
        grouped = text.str.fullmatch(PARAMS["grouped_regex"]).fillna(False)
        text = text.where(~grouped, text.str.replace(",", "", regex=False))
        plain = text.str.fullmatch(PARAMS["number_regex"]).fillna(False).to_numpy(dtype=bool)
        values = pd.to_numeric(text.where(plain), errors="coerce").to_numpy(dtype=float)
        low = text.where(plain, "0").str.lower()
        mantissa = low.str.split("e", n=1).str[0]
        exponent = pd.to_numeric(low.str.split("e", n=1).str[1], errors="coerce").fillna(0).to_numpy(dtype=float)
        point = mantissa.str.find(".").to_numpy(dtype=float)
        decimals = np.where(point >= 0, mantissa.str.len().to_numpy(dtype=float) - point - 1, 0.0) - exponent
        half = np.where(plain & (np.abs(decimals) <= 300), 0.5 * 10.0 ** (-np.clip(decimals, -300, 300)), np.nan)
        # A zero is written as finely as the column's other numbers.
        others = half[np.isfinite(half) & (values != 0)]
        if others.size:
            half = np.where(values == 0, np.minimum(half, float(np.median(others))), half)
        return values, half

    holds = np.zeros(ROWS, dtype=bool)
    for rel in PARAMS["relations"]:
        c, rc = written(rel["target"])
        a, ra = written(rel["left"])
        b, rb = written(rel["right"]) if "right" in rel else (np.zeros(ROWS), np.zeros(ROWS))
        k, form = float(rel["k"]), rel["form"]
        if rel["exact"]:  # numbers written as integers are counts: exact
            rc, ra, rb = (np.where(x >= 0.5, 0.0, x) for x in (rc, ra, rb))
        with np.errstate(all="ignore"):
            if form == "+":
                pred, tol = a + b, rc + ra + rb
            elif form == "-":
                pred, tol = a - b, rc + ra + rb
            elif form == "*":
                pred, tol = k * a * b, rc + abs(k) * (np.abs(b) * ra + np.abs(a) * rb)
            elif form == "/":
                pred = np.where(b != 0, k * a / b, np.nan)
                tol = rc + abs(k) * (ra / np.abs(b) + np.abs(a) * rb / (b * b))
            else:
                pred, tol = k * a, rc + abs(k) * ra
            tol = tol * 1.001 + 1e-9 * np.maximum(1.0, np.abs(c))
            checkable = np.isfinite(c) & np.isfinite(pred) & np.isfinite(tol)
            holds = holds | (checkable & (np.abs(pred - c) > tol))
elif rule == "conditional":
    # Rows that meet a rule's condition (a prefix of a code, the sign of a number) and hold another value.
    name = PARAMS["column"]
    facet = PARAMS["facet"]
    source = col(facet["column"]).str.strip()
    if facet["kind"] == "prefix":
        coded = source.str.fullmatch(facet["code_regex"]).fillna(False)
        classes = source.str.slice(0, int(facet["length"])).where(coded)
    else:
        numbers = pd.to_numeric(source.where(source.str.fullmatch(facet["number_regex"]).fillna(False)), errors="coerce")
        classes = pd.Series(np.sign(numbers.to_numpy(dtype=float))).map({-1.0: "<0", 0.0: "=0", 1.0: ">0"})
    values = col(name)
    holds = np.zeros(ROWS, dtype=bool)
    for r in PARAMS["rules"]:
        meets = (classes == r["when"]).to_numpy(dtype=bool)
        holds = holds | (meets & (values != r["then"]).to_numpy(dtype=bool))
    holds = holds & present(name)
else:
    name = PARAMS.get("column", NAMES[0])
    holds = np.ones(ROWS, dtype=bool)
mask = listed & holds
result = summary(mask, mask.sum(), name, column=name, rule=rule, rows_listed=int(rows.size), rows_holding=int(mask.sum()))
"""

DEPENDENCY = """\
lhs = list(PARAMS["lhs"])
rhs = PARAMS["rhs"]
support = int(PARAMS.get("min_support", 1))
# Values are compared as integer codes (one per distinct value) and counted with numpy.
y_codes, y_uniques = encode(col(rhs))
n_y = max(len(y_uniques), 1)
# Each row's lhs group as one integer; a row with a missing (NaN) lhs value joins no group.
key = np.zeros(ROWS, dtype=np.int64)
grouped = np.ones(ROWS, dtype=bool)
for name in lhs:
    codes, uniques = encode(col(name))
    key = pd.factorize(key * len(uniques) + codes)[0]
    grouped &= ~uniques.isna().to_numpy()[codes]
sizes = np.bincount(key[grouped], minlength=key.max() + 1 if ROWS else 0)
# Each (group, rhs) pair, numbered in order of first appearance, and how often it occurs.
counted = grouped & ~y_uniques.isna().to_numpy()[y_codes]
pair_codes, pairs = pd.factorize(key[counted] * n_y + y_codes[counted])
n = np.bincount(pair_codes, minlength=len(pairs))
# The mode of each group: its most frequent rhs, the first seen winning a tie (-1 when there is none).
ranked = np.lexsort((np.arange(len(pairs)), -n, pairs // n_y))
group_of, rhs_of = pairs[ranked] // n_y, pairs[ranked] % n_y
top = np.ones(len(ranked), dtype=bool)
top[1:] = group_of[1:] != group_of[:-1]
mode = np.full(len(sizes), -1, dtype=np.int64)
mode[group_of[top]] = rhs_of[top]
mask = grouped & (sizes[key] >= support) & (y_codes != mode[key])
conflicting = int(np.unique(key[mask]).size)
result = summary(mask, mask.sum(), rhs, lhs=lhs, rhs=rhs, conflicting_groups=conflicting)
"""

DERIVED = """\
name = PARAMS["column"]
values = col(name)
built = col(PARAMS["left"]) + PARAMS["separator"] + col(PARAMS["right"])
missing = {str(m).strip().lower() for m in PARAMS.get("missing_markers", [""])}
broken = (values != built) & ~values.str.strip().str.lower().isin(missing)
excused = np.zeros(ROWS, dtype=bool)
excused[[int(r) for r in PARAMS.get("excused_rows", []) if 0 <= int(r) < ROWS]] = True
mask = broken.to_numpy() & ~excused & ~values.isin(EXCLUDED).to_numpy()
result = summary(mask, mask.sum(), name, column=name, rule=PARAMS["left"] + " + separator + " + PARAMS["right"])
"""

MERGED = """\
name = PARAMS["column"]
other = PARAMS["other"]
values = col(name)
others = col(other)
blank = others.str.strip() == ""
seen = set(others[~blank].str.strip().unique().tolist())


def merged(value):
    parts = str(value).split(" ")
    return any(" ".join(parts[i:]) in seen for i in range(1, len(parts)))


hits = {v for v in values[blank].unique().tolist() if merged(v)}
mask = blank & values.isin(hits) & ~left_out(values)
result = summary(mask, mask.sum(), name, column=name, other=other)
"""

MISSING_TOGETHER = """\
columns = PARAMS["columns"]
tokens = {str(m).strip().casefold() for m in PARAMS["markers"]}
missing = np.zeros(ROWS, dtype=np.int64)
for name in columns:
    values = col(name).str.strip()
    missing += values.isin([v for v in values.unique().tolist() if v.casefold() in tokens]).to_numpy(dtype=np.int64)
mask = missing >= int(PARAMS.get("min_missing", 2))
result = summary(mask, int(mask.sum()) * len(columns), columns[0], columns=columns)
"""

CONSTANT = """\
name = PARAMS["column"]
count = int(col(name).nunique(dropna=False))
mask = np.full(ROWS, count == 1)
result = summary(mask, mask.sum(), name, column=name, distinct=count)
"""

ALL_UNIQUE = """\
name = PARAMS["column"]
count = int(col(name).nunique(dropna=False))
mask = np.full(ROWS, count == ROWS and ROWS > 0)
result = summary(mask, mask.sum(), name, column=name, distinct=count)
"""

TEMPLATES: dict[str, str] = {
    "missing_values": MARKERS,
    "missing_together": MISSING_TOGETHER,
    "disguised_missing": MARKERS,
    "duplicate_rows": DUPLICATES,
    "near_duplicate_rows": NEAR_DUPLICATES,
    "mixed_types": PATTERN,
    "format_violation": PATTERN,
    "unit_in_number": PATTERN,
    "out_of_domain": PATTERN,
    "inconsistent_category": BAD_VALUES,
    "encoding_damage": BAD_VALUES,
    "stray_whitespace": BAD_VALUES,
    "numeric_outlier": OUTLIER,
    "dependency_violation": DEPENDENCY,  # or a rule over listed rows, by the parameters (see template_code)
    "merged_columns": MERGED,
    "constant_column": CONSTANT,
    "all_unique_column": ALL_UNIQUE,
}

# The parameters each template reads from `issue.evidence.stats`; an issue without them is not supported.
REQUIRED_STATS: dict[str, tuple[str, ...]] = {
    "missing_values": ("column", "markers"),
    "missing_together": ("columns", "markers"),
    "disguised_missing": ("column", "markers"),
    "duplicate_rows": ("columns",),
    "near_duplicate_rows": ("columns",),
    "inconsistent_category": ("column", "bad_values"),
    "encoding_damage": ("column", "bad_values"),
    "stray_whitespace": ("column", "bad_values"),
    "numeric_outlier": ("column", "low", "high", "bad_values"),
    "dependency_violation": ("lhs", "rhs"),
    "merged_columns": ("column", "other"),
    "constant_column": ("column",),
    "all_unique_column": ("column",),
}
PATTERN_TYPES = frozenset({"mixed_types", "format_violation", "unit_in_number", "out_of_domain"})


class UnsupportedIssue(ValueError):
    """No template can investigate this issue (read-level, unknown type, or parameters missing)."""


def supports(issue: Issue) -> bool:
    """True when a template can recompute this issue's claim from the loaded frame."""
    if issue.type in READ_LEVEL_TYPES or issue.type not in TEMPLATES:
        return False
    stats = issue.evidence.stats if issue.evidence else {}
    if issue.type in PATTERN_TYPES:
        return "column" in stats and ("expected_regex" in stats or "bad_values" in stats)
    if "rows" in stats and "rule" in stats:
        return True
    if "rule" in stats and "bad_values" in stats and "column" in stats:
        return True
    if issue.type == "dependency_violation" and "separator" in stats:
        return all(k in stats for k in ("column", "left", "right"))
    return all(k in stats for k in REQUIRED_STATS[issue.type])


# Stats no template reads (what the report shows and the fixes apply): left out of the code.
DISPLAY_ONLY = frozenset({"title", "examples", "canonical"})
# Parameters from this size on travel compressed: a long column's listed values (up to MAX_LISTED of them, and
# as many excluded) were 136 KB of code on 3M rows, over the sandbox policy's 100,000 characters and the
# state's room for code; sorted values compress 4-5 fold.
COMPRESS_FROM = 16 * 1024


def _params_literal(params: dict) -> tuple[str, str]:
    """(imports, an expression of the JSON parameters) that the sandbox policy accepts whatever the column
    names: a JSON string literal, or from COMPRESS_FROM characters on, the same JSON deflated in base64."""
    text = json.dumps(params, ensure_ascii=True, sort_keys=True)
    if len(text) >= COMPRESS_FROM:
        packed = base64.b64encode(zlib.compress(text.encode("ascii"), 9)).decode("ascii")
        return "import base64\nimport zlib\n", f"json.loads(zlib.decompress(base64.b64decode({packed!r})))"
    # The policy refuses string constants containing "__"; JSON decodes \\u005f back to "_".
    if "__" in text:
        text = text.replace("_", "\\u005f")
    return "", f"json.loads({text!r})"


def template_code(issue: Issue) -> str:
    """The investigation script for an issue; raises UnsupportedIssue when there is no template for it."""
    if not supports(issue):
        raise UnsupportedIssue(f"no offline template for issue {issue.id!r} of type {issue.type!r}")
    stats = dict(issue.evidence.stats) if issue.evidence else {}
    template = TEMPLATES[issue.type]
    if "rows" in stats and "rule" in stats:
        template = ROWS_RULE  # the cells are listed: each one's claim is re-checked
    elif "rule" in stats and "bad_values" in stats and issue.type != "numeric_outlier":
        template = VALUE_RULE  # the values are listed: each one's claim is re-checked, then counted
    elif issue.type == "dependency_violation" and "separator" in stats:
        template = DERIVED  # a column built from two others (state_average = state + "_" + measure_code)
    imports, params = _params_literal({k: v for k, v in stats.items() if k not in DISPLAY_ONLY})
    return imports + PRELUDE.format(params=params) + template


def _detector_missing_tokens() -> set[str]:
    """The tokens the detectors read as missing, for issues whose parameters do not list them."""
    try:
        from iterate.profile.shapes import MISSING_TOKENS
    except ImportError:  # the profiler is absent: blanks only
        return {""}
    return set(MISSING_TOKENS)


class OfflineInvestigationAgent:
    """Implements `InvestigationAgent` with templates; the code is the same on every attempt by design."""

    source = "template"

    def supports(self, issue: Issue) -> bool:
        return supports(issue)

    def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]) -> str:
        """The template for the issue's type (a retry yields the same code, which the loop detects)."""
        return template_code(issue)
