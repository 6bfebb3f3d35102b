"""Text hygiene: stray whitespace, encoding damage, text left escaped, and stray symbols."""

from __future__ import annotations

import codecs
import contextlib
import html
import math
import re
import unicodedata

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.detect.context import ColumnFacts
from iterate.detect.findings import MAX_LISTED, Finding, cells
from iterate.wording import agree, plural

# Mojibake: UTF-8 bytes decoded as cp1252/latin-1 (Ã©, â€™, Â ), and the replacement character.
MOJIBAKE = (
    r"Ã[\x{80}-\x{BF}\x{A0}-\x{FF}]|Â[\x{A0}-\x{BF}]|â€[\x{80}-\x{BF}\x{98}-\x{9F}™œ\x{9D}]|â€|\x{FFFD}"
)
STRAY_SHARE = 0.2  # stray spaces are an issue when only a minority of values have them
# Text left escaped on its way out of HTML or JSON: `Tom &amp; Jerry`, `Pe\u00f1a`, `\"Ace\"`.
ESCAPED = (
    r"&(?:[A-Za-z]{2,8}|#[0-9]{2,5}|#[xX][0-9A-Fa-f]{2,4});|\\(?:u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2}|[\"'ntr\\])"
)
SYMBOL_CANDIDATE_SHARE = 0.1  # symbols written in more of a column's rows than this are its own (work bound)
_SYMBOL = re.compile(r"([^\w\s])\1|[^\w\s]")
# What is certainly a word character or a space for Python's `re` too (RE2's own \w and \s are ASCII-only).
_NOT_SYMBOL = r"[\p{L}\p{N}_\s\p{Z}]+"
_WORDS = re.compile(r"[\w\s]+")
# Marks that are symbols proper though Unicode files them as punctuation: none of them is written as part of
# ordinary spelling the way an apostrophe, a hyphen or an ampersand is.
_PROPER = frozenset("*#@^~|\\")
PYTHON_SIGNATURES = 20_000  # distinct values up to which signatures are made in Python (work bound)


def detect_whitespace(f: ColumnFacts) -> Finding | None:
    present = f.present & (f.counts > 0)
    if f.n_present < 5:
        return None
    d = f.column.dictionary
    stray = np.asarray(pc.not_equal(pc.utf8_trim_whitespace(d), d).to_numpy(zero_copy_only=False), dtype=bool)
    stray &= present
    n = int(f.counts[stray].sum())
    if n == 0 or n > STRAY_SHARE * f.n_present:
        return None  # a column that pads every value does so by convention
    ids = np.flatnonzero(stray)
    rows, cols = cells(f.column.rows_of(ids), f.index)
    trimmed = {v: v.strip() for v in f.column.texts(ids)}
    return Finding(
        type="stray_whitespace",
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=f"Leading or trailing spaces in {f.name}",
        description="",
        describe=lambda fd: (
            f"{plural(fd.n_cells, 'value')} in '{f.name}' {agree(fd.n_cells, 'starts or ends', 'start or end')} "
            "with spaces that the other values "
            "do not have; they will not match equal values in joins, filters and group-bys."
        ),
        suggested_action="Trim leading and trailing whitespace.",
        category="quick_fixes",
        detector="whitespace",
        damage="format",
        stats={
            "column": f.name,
            "bad_values": sorted(trimmed)[:MAX_LISTED],
            "canonical": dict(list(trimmed.items())[:MAX_LISTED]),
        },
        expected=[trimmed[f.column.value(int(r))] for r in rows],
        key=f"whitespace:{f.name}",
    )


def detect_encoding(f: ColumnFacts) -> Finding | None:
    d = f.column.dictionary
    bad = np.asarray(pc.match_substring_regex(d, pattern=MOJIBAKE).to_numpy(zero_copy_only=False), dtype=bool)
    bad &= f.counts > 0
    if not bad.any():
        return None
    ids = np.flatnonzero(bad)
    rows, cols = cells(f.column.rows_of(ids), f.index)
    repaired = {}
    for v in f.column.texts(ids):
        try:
            repaired[v] = v.encode("cp1252").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            repaired[v] = v
    return Finding(
        type="encoding_damage",
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=f"Garbled characters in {f.name}",
        description="",
        describe=lambda fd: (
            f"{plural(fd.n_cells, 'value')} in '{f.name}' {agree(fd.n_cells, 'contains', 'contain')} characters "
            "damaged by a wrong text "
            f"encoding (e.g. '{f.column.value(int(fd.rows[0]))}')."
        ),
        suggested_action="Re-export the source as UTF-8, or repair the values (the report shows the likely originals).",
        category="quick_fixes",
        detector="encoding",
        stats={
            "column": f.name,
            "bad_values": sorted(repaired)[:MAX_LISTED],
            "canonical": dict(list(repaired.items())[:MAX_LISTED]),
        },
        expected=[repaired[f.column.value(int(r))] for r in rows],
        key=f"encoding:{f.name}",
    )


def _unescape(text: str) -> str:
    """`text` decoded until it stops changing (at most 3 times): a value escaped twice (`Martha\\\\'s`) decodes
    to the plain text, not to a value still escaped, which the fix would write and the next run flag again."""
    out = text
    for _ in range(3):
        before = out
        out = html.unescape(out)
        if "\\" in out:
            with contextlib.suppress(UnicodeDecodeError, UnicodeEncodeError):
                out = codecs.decode(out.encode("latin-1", "backslashreplace"), "unicode_escape")
        if out == before:
            break
    return out


def detect_escaped(f: ColumnFacts) -> Finding | None:
    """Values holding HTML entities or escape sequences (`Tom &amp; Jerry`, `Pe\\u00f1a`) in a column that
    mostly does not: text that left one format without being decoded."""
    d = f.column.dictionary
    bad = np.asarray(pc.match_substring_regex(d, pattern=ESCAPED).to_numpy(zero_copy_only=False), dtype=bool)
    bad &= f.present & (f.counts > 0)
    if not bad.any() or f.counts[bad].sum() > STRAY_SHARE * max(f.n_present, 1):
        return None  # a column of markup or JSON writes its values that way
    ids = np.flatnonzero(bad)
    texts = f.column.texts(ids)
    decoded = [_unescape(v) for v in texts]
    keep = np.array([d != v for d, v in zip(decoded, texts, strict=True)], dtype=bool)
    ids = ids[keep]
    if not ids.size:
        return None
    # Only the values that decode to something else: they are what the proof recounts and the fix rewrites.
    repaired = {v: d for v, d, k in zip(texts, decoded, keep.tolist(), strict=True) if k}
    rows, cols = cells(f.column.rows_of(ids), f.index)
    return Finding(
        type="encoding_damage",
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=f"Text left escaped in {f.name}",
        description="",
        describe=lambda fd: (
            f"{plural(fd.n_cells, 'value')} in '{f.name}' {agree(fd.n_cells, 'holds', 'hold')} HTML entities or "
            f"escape sequences (e.g. '{f.column.value(int(fd.rows[0]))}'): text copied out of a web page or a "
            "JSON file without being decoded."
        ),
        suggested_action="Decode the entities and escapes (the report shows the decoded values).",
        category="quick_fixes",
        detector="encoding",
        stats={
            "column": f.name,
            "bad_values": sorted(repaired)[:MAX_LISTED],
            "canonical": dict(list(repaired.items())[:MAX_LISTED]),
        },
        expected=[repaired.get(f.column.value(int(r))) for r in rows],
        key=f"escaped:{f.name}",
    )


def detect_stray_symbols(f: ColumnFacts) -> Finding | None:
    """Values holding a symbol (or a doubled punctuation mark) the column seldom writes: `O''Brien`, `NY-*`,
    `Civic*` among names and codes. Evidence only (read by the fitted decision): how rare the symbol is in
    the column, whether it sits at an end of the value, whether it is doubled."""
    if f.n_present < 20 or f.free_text or f.prose or not f.has_letter.any():
        return None
    ids = np.flatnonzero(f.present & (f.counts > 0) & f.has_letter)
    if not ids.size:
        return None
    # Each value reduced, in pyarrow, to its symbols: every run of word characters and spaces becomes one space
    # (so adjacency, hence doubling, is kept); a column has few such signatures, and only they reach Python.
    if ids.size <= PYTHON_SIGNATURES:  # few values: Python's regex is quicker than a trip through pyarrow
        index: dict[str, int] = {}
        sig_codes = np.array(
            [index.setdefault(_WORDS.sub(" ", t), len(index)) for t in f.column.texts(ids)], dtype=np.int64
        )
        sig_texts = list(index)
    else:
        values = f.column.dictionary.take(pa.array(ids, pa.int64()))
        signature = pc.replace_substring_regex(values, _NOT_SYMBOL, " ").dictionary_encode()
        sig_codes = signature.indices.to_numpy(zero_copy_only=False)
        sig_texts = [str(t) for t in signature.dictionary.to_pylist()]
    sig_marks = [sorted({m.group(0) for m in _SYMBOL.finditer(t)}) for t in sig_texts]
    rows_per_sig = np.bincount(sig_codes, weights=f.counts[ids], minlength=len(sig_marks))
    rows_with: dict[str, float] = {}
    for marks, c in zip(sig_marks, rows_per_sig.tolist(), strict=True):
        for m in marks:
            rows_with[m] = rows_with.get(m, 0.0) + c
    if not rows_with:
        return None
    total = float(f.n_present)
    rare = {m for m, n in rows_with.items() if n <= SYMBOL_CANDIDATE_SHARE * total}
    # Per signature, the rarest of its rare symbols (None: it writes none).
    chosen = [
        min((m for m in marks if m in rare), key=lambda x: rows_with[x], default=None) for marks in sig_marks
    ]
    holding = np.array([m is not None for m in chosen], dtype=bool)
    at = np.flatnonzero(holding[sig_codes])
    hit, rarity, edge, doubled, bare = [], [], [], [], []
    for i, t, code in zip(ids[at].tolist(), f.column.texts(ids[at]), sig_codes[at].tolist(), strict=True):
        m = chosen[code]
        assert m is not None
        share = (rows_with[m] + 1.0) / (total + 2.0)
        hit.append(i)
        rarity.append(-math.log(share))
        core = t.strip()
        edge.append(1.0 if core.startswith(m) or core.endswith(m) else 0.0)
        doubled.append(
            1.0 if len(m) == 2 or m[0] in _PROPER or unicodedata.category(m[0]).startswith("S") else 0.0
        )
        # The value with the mark taken out (a doubled mark written once), spaces closed up.
        bare.append(" ".join(core.replace(m, m[0] if len(m) == 2 else "").split()))
    if not hit:
        return None
    # How many rows write the value without the mark (`tsx` for `tsx*`, `O'Brien` for `O''Brien`): a mark
    # added to a value the column writes as it is.
    found = pc.fill_null(pc.index_in(pa.array(bare, pa.string()), value_set=f.column.dictionary), -1)
    at_bare = found.to_numpy(zero_copy_only=False).astype(np.int64)
    without = np.where(at_bare >= 0, f.counts[np.maximum(at_bare, 0)], 0).astype(np.float64)
    from iterate.detect.findings import value_finding

    rarity_a = np.array(rarity)
    name = f.name

    def describe(fd: Finding) -> str:
        shown = ", ".join(repr(v) for v in fd.stats["bad_values"][:4])
        return (
            f"{plural(fd.n_cells, 'value')} in '{name}' {agree(fd.n_cells, 'holds', 'hold')} a symbol the column "
            f"seldom writes ({shown}): a stray keystroke or a mark pasted in with the value."
        )

    return value_finding(
        f,
        np.array(hit, dtype=np.int64),
        rarity_a - math.log(2.0),
        rarity_a,
        {"rarity": rarity_a, "edge": np.array(edge), "doubled": np.array(doubled), "bare": np.log1p(without)},
        type="format_violation",
        columns=[name],
        title=f"Stray symbols in {name}",
        description="",
        describe=describe,
        suggested_action="Remove the stray symbols (check first that they are not part of the name).",
        category="smart_fixes",
        detector="symbols",
        stat_name="-log(share of the column's rows writing the symbol)",
        stats={"column": name, "bad_values": sorted(f.column.texts(np.array(hit)))[:MAX_LISTED]},
        key=f"symbols:{name}",
    )
