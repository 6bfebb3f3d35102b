"""Slips inside words: in a column of names, titles or addresses, a word the column rarely writes that is one
keyboard slip away from a word it writes often ('Airways Brewing Cmopany' among hundreds of '... Company').

The value-level spelling check (typos.py) needs a value to repeat before it can be anyone's reference; in a
column of nearly unique names no value repeats, but its *words* do. The column's word vocabulary is counted
on its distinct values (how many values hold each word), and a rare word one slip from a frequent word is a
candidate. Edit distance alone proves little (Smyth beside Smith, Lolo beside Lola, a brand): the evidence
weighs, all estimated from the column itself,

- how often the reference is written (the more often, the more of its slips a column carries), against how
  many legitimately rare words sit near it by chance: its established neighbours (words the column writes
  in three values or more, one edit from it: 'Pale', 'Dale' beside 'Ale') scaled by how much rarer than
  established words the column's words usually are; a word without such neighbours takes the mean of the
  words of its length (short words are one edit from many others);
- the kind of slip: how much likelier it is from a typing hand than between the column's own legitimate
  neighbours (a swap of neighbours, a doubled letter, a neighbouring key are what hands do; a different
  vowel is what names do), the latter counted on the column's established pairs;
- the word's case: a slip keeps the word's capitals where they were, so a rare word written in a case shape
  the reference never has ('rBewing', 'BBrewery') is evidence as strong as the column's rare words rarely
  take that shape;
- a space typed one letter off ('Golde nLager'), which splits two established words into two rare ones.

Other columns of the row (an id whose other rows write the name right) add their evidence in the decision.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.detect.calibration import DEFAULT, Calibration, repeat_discount
from iterate.detect.context import ColumnFacts
from iterate.detect.findings import MAX_LISTED, Finding, value_finding
from iterate.detect.textdist import DeletionIndex, _near_keys
from iterate.detect.typos import min_reference_ratio
from iterate.wording import agree, plural

MIN_WORD = 3  # shorter words are one edit from nearly every other short word
ESTABLISHED = 3  # a word the column writes in this many distinct values is its own vocabulary
RARE = 2  # a word written in at most this many distinct values is rare
MIN_VALUES = 50  # distinct values before a column's vocabulary says anything
# Share of a column's pieces (between spaces) that are words (no digit, @, slash or underscore: not a code, an
# e-mail address or a path), in a column of words.
MIN_PLAIN = 0.5
# How much likelier each kind of slip is from a typing hand (rough shares of single-edit typing errors) ...
TYPO_KINDS = {
    "swap": 0.18,
    "double": 0.12,
    "undouble": 0.06,
    "drop": 0.2,
    "near": 0.18,
    "insert": 0.1,
    "sub": 0.12,
    "case": 0.04,
    "space": 0.05,
}
# ... and, before the column's own established pairs are counted, between two legitimate words (a different
# vowel or consonant, a letter more or less; hardly ever two neighbours swapped or a letter doubled).
LEGIT_PRIOR = {
    "swap": 0.02,
    "double": 0.05,
    "undouble": 0.05,
    "drop": 0.2,
    "near": 0.1,
    "insert": 0.2,
    "sub": 0.36,
    "case": 0.02,
    "space": 0.002,
}
PRIOR_WEIGHT = 20.0  # the legitimate prior counts as this many established pairs
TYPO_SHARE = 0.5  # share of a text column's wrong values that are slips inside a word
# The column's own odds of a slip, fitted on its candidates' kinds, start at the word model's and move from
# it by about this much (nats, one standard deviation) before the kinds are read.
ODDS_PRIOR_SD = 1.0
SHAPE_CHANGE = 0.1  # chance that a slip changes the written case shape of its word
# Established neighbours an established word has, by length (up to 4 letters, 5-6, 7 or more), before the
# column's own words are counted: short words sit among many others, long ones among hardly any.
BAND_PRIOR = (0.1, 0.03, 0.01)
BAND_WEIGHT = 10.0  # ... counting as this many words
LOWER, TITLE, UPPER, CAMEL, MIXED = range(5)
ACRONYM = 4  # a word this short written in capitals is a code: one code is one edit from the next


def shape(word: str) -> int:
    """A word's case shape: lower, Title, UPPER, CamelCase (a capital after a small letter, as brands and
    names write them: SanTan, McDonald) or anything else (a capital after a small first letter, two leading
    capitals before small letters: what a slipped shift key writes)."""
    if word.islower():
        return LOWER
    if word.isupper():
        return UPPER if len(word) > 1 else TITLE
    if word[:1].isupper():
        if word[1:].islower():
            return TITLE
        if not word[1].isupper():
            return CAMEL
    return MIXED


def slip_kind(variant: str, reference: str) -> str | None:
    """The single slip that turns `reference` into `variant` (both case-folded), or None when they are not
    one slip apart or differ as forms of one word do (a plural 's')."""
    la, lb = len(variant), len(reference)
    if la == lb:
        diff = [i for i in range(la) if variant[i] != reference[i]]
        if len(diff) == 1:
            i = diff[0]
            return "near" if _near_keys(variant[i], reference[i]) else "sub"
        if (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and variant[diff[0]] == reference[diff[1]]
            and variant[diff[1]] == reference[diff[0]]
        ):
            return "swap"
        return None
    if la == lb + 1:
        longer, shorter, grew = variant, reference, True
    elif lb == la + 1:
        longer, shorter, grew = reference, variant, False
    else:
        return None
    i = 0
    while i < len(shorter) and longer[i] == shorter[i]:
        i += 1
    if longer[i + 1 :] != shorter[i:]:
        return None
    if i == len(shorter) and longer[i] == "s":
        return None  # a plural or a verb's s: another form of the word
    c = longer[i]
    doubled = (i > 0 and longer[i - 1] == c) or (i + 1 < len(longer) and longer[i + 1] == c)
    if grew:
        return "double" if doubled else "insert"
    return "undouble" if doubled else "drop"


def edit_signature(a: str, b: str) -> frozenset[str]:
    """Where two words differ, with a letter of context on each side ('slategrey', 'slategray': {'rey',
    'ray'}): two pairs with one signature differ the same way."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    q = 0
    while q < min(len(a), len(b)) - p and a[-1 - q] == b[-1 - q]:
        q += 1
    lo = max(p - 1, 0)
    return frozenset((a[lo : len(a) - q + 1], b[lo : len(b) - q + 1]))


@dataclass
class Slip:
    """A value's word that reads as a slip of a frequent word of its column."""

    value: int  # position in the column's dictionary
    written: str  # the word (or the two words, for a space slip) as the value writes it
    reference: str  # what the column writes instead, in its usual case
    kind: str
    llr: float


def _band(length: int) -> int:
    return 0 if length <= 4 else 1 if length <= 6 else 2


@dataclass
class Vocabulary:
    """A column's words, counted on its distinct values: per case-folded word, how many times the values
    write it (`df`); per word, its written forms with their counts, commonest first."""

    df: dict[str, int]
    forms: dict[str, list[tuple[str, int]]]
    parents: np.ndarray  # per word written: the value that writes it
    folded: np.ndarray  # ... and its case-folded word's position in `words`
    codes: np.ndarray  # ... and its written form's position in `written`
    words: list[str]
    written: list[str]
    words_per_value: float


def vocabulary(values: pa.Array) -> Vocabulary | None:
    """Split every value into its words (runs of letters). The values are split at white space by a vectorised
    kernel; the Python work (letter runs, case folding) is on the distinct pieces, not the values."""
    split = pc.utf8_split_whitespace(values)
    parent = np.asarray(pc.list_parent_indices(split).to_numpy(zero_copy_only=False), dtype=np.int64)
    encoded = pc.dictionary_encode(pc.list_flatten(split))
    piece = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    plain = np.asarray(pc.utf8_is_alpha(encoded.dictionary).to_numpy(zero_copy_only=False), dtype=bool)
    coded = pc.match_substring_regex(encoded.dictionary, pattern=r"[0-9@/\\_]")
    wordy = ~np.asarray(pc.fill_null(coded, False).to_numpy(zero_copy_only=False), dtype=bool)
    if piece.size == 0 or np.bincount(piece, minlength=wordy.size)[wordy].sum() < MIN_PLAIN * piece.size:
        return None  # codes, e-mail addresses, paths, numbers: not a column of words
    written_ids: dict[str, int] = {}
    fold_ids: dict[str, int] = {}
    runs_of: list[list[int]] = []  # per distinct piece: the written forms of its words
    for text, alpha in zip(encoded.dictionary.to_pylist(), plain.tolist(), strict=True):
        runs = [text] if alpha else [w for _, w in letter_runs(text)]
        runs_of.append([written_ids.setdefault(w, len(written_ids)) for w in runs])
    written = list(written_ids)
    fold_of = np.array([fold_ids.setdefault(w.casefold(), len(fold_ids)) for w in written], dtype=np.int64)
    words = list(fold_ids)
    # One entry per word written: the piece's occurrences repeated for each of its words.
    n_runs = np.array([len(r) for r in runs_of], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(n_runs)])
    flat_runs = np.array([w for r in runs_of for w in r], dtype=np.int64)
    per = n_runs[piece] if piece.size else np.zeros(0, dtype=np.int64)
    parents = np.repeat(parent, per)
    offsets = np.repeat(starts[piece] - np.concatenate([[0], np.cumsum(per)[:-1]]), per) if per.size else per
    codes = flat_runs[np.arange(int(per.sum())) + offsets] if per.sum() else np.zeros(0, dtype=np.int64)
    folded = fold_of[codes] if codes.size else np.zeros(0, dtype=np.int64)
    form_count = np.bincount(codes, minlength=len(written))
    df_count = np.bincount(folded, minlength=len(words))
    forms: dict[str, list[tuple[str, int]]] = {}
    for i in np.argsort(-form_count, kind="stable").tolist():
        if form_count[i] > 0:
            forms.setdefault(words[fold_of[i]], []).append((written[i], int(form_count[i])))
    df = {w: int(k) for w, k in zip(words, df_count.tolist(), strict=True) if k > 0}
    per_value = float(codes.size) / max(len(values), 1)
    return Vocabulary(df, forms, parents, folded, codes, words, written, max(per_value, 1.0))


def letter_runs(text: str) -> list[tuple[int, str]]:
    """The words of a text (runs of letters, as the vocabulary splits them) and where each starts."""
    spaced = "".join(ch if ch.isalpha() else " " for ch in text)
    return [(m.start(), m.group(0)) for m in _RUN.finditer(spaced)]


_RUN = re.compile(r"\S+")


def find_slips(
    texts: list[str] | pa.Array,
    rows: np.ndarray,
    typical: float = 1.0,
    cal: Calibration = DEFAULT,
) -> list[Slip]:
    """The slips among distinct values `texts` (each held by `rows` rows, in a column whose values are
    typically held by `typical` rows), with their evidence. A misspelt value repeated across as many rows
    as the column's values usually fill is likelier the way its entity is written than a slip."""
    values = texts if isinstance(texts, pa.Array) else pa.array(texts, pa.string())
    vocab = vocabulary(values)
    if vocab is None:
        return []
    df, forms = vocab.df, vocab.forms
    established = [w for w, k in df.items() if k >= ESTABLISHED and len(w) >= MIN_WORD]
    if not established:
        return []
    rare = [w for w, k in df.items() if k <= RARE and len(w) >= MIN_WORD]
    index = DeletionIndex(enumerate(established))
    # Established neighbours of each established word, and the kinds of those legitimate pairs.
    neighbours = np.zeros(len(established), dtype=np.float64)
    legit_kinds: Counter[str] = Counter()
    legit_edits: set[frozenset[str]] = set()  # the column's own variation: gray/grey explains slategrey
    for i, w in enumerate(established):
        for j in index.near(w):
            if j == i:
                continue
            neighbours[i] += 1
            other = established[j]
            if (df[other], other) < (df[w], w):
                legit_edits.add(edit_signature(other, w))
                kind = slip_kind(other, w)
                if kind:
                    legit_kinds[kind] += 1
    bands = np.array([_band(len(w)) for w in established])
    band_mean = [
        (float(neighbours[bands == b].sum()) + BAND_WEIGHT * BAND_PRIOR[b])
        / (float((bands == b).sum()) + BAND_WEIGHT)
        for b in range(3)
    ]
    # Legitimately rare words per established one: how much rarer the column's words usually are.
    spread = (len(rare) + 1.0) / (len(established) + 1.0)
    n_pairs = sum(legit_kinds.values())
    legit_share = {
        k: (legit_kinds[k] + PRIOR_WEIGHT * LEGIT_PRIOR[k]) / (n_pairs + PRIOR_WEIGHT) for k in TYPO_KINDS
    }
    kind_llr = {k: math.log(TYPO_KINDS[k] / legit_share[k]) for k in TYPO_KINDS}
    # Case shapes the column's rare words take (a slip keeps its word's shape).
    shapes: Counter[int] = Counter(shape(form) for w in rare for form, _ in forms[w])
    n_shapes = sum(shapes.values())
    pos = {w: i for i, w in enumerate(established)}

    def usual(word: str) -> str:
        return forms[word][0][0]

    def evidence(ref: str, kind: str, form: str) -> float:
        chance = spread * (neighbours[pos[ref]] + band_mean[_band(len(ref))]) / 2.0
        llr = math.log(TYPO_SHARE * df[ref] / (vocab.words_per_value * chance)) + kind_llr[kind]
        s = shape(form)
        if s not in {shape(f) for f, _ in forms[ref]}:
            share = (shapes[s] + 1.0) / (n_shapes + 5.0)
            llr += max(math.log(SHAPE_CHANGE / share), 0.0)
        return llr

    best_ref: dict[str, tuple[str, str]] = {}  # rare word → (reference, kind)
    acronyms = shapes[UPPER] < 0.5 * n_shapes  # capitals mark codes, not the column's way of writing
    for w in rare:
        if acronyms and len(w) <= ACRONYM and all(shape(form) == UPPER for form, _ in forms[w]):
            continue
        need = min_reference_ratio(len(w)) * df[w]
        # The most common reference; of two as common ('MARKT': 'MART' with a letter more, 'MARKET' with one
        # less), the one whose kind of slip this column's words least explain as legitimate variation.
        best: tuple[int, float, str, str] | None = None
        for j in index.near(w):
            ref = established[j]
            if df[ref] < need or (best is not None and df[ref] < best[0]):
                continue
            kind = slip_kind(w, ref)
            if not kind or edit_signature(w, ref) in legit_edits:
                continue
            if best is None or (df[ref], kind_llr[kind]) > best[:2]:
                best = (df[ref], kind_llr[kind], ref, kind)
        if best is not None:
            best_ref[w] = (best[2], best[3])
    # A case slip: the shift key held one letter too long ('BRewing' where the column writes 'Brewing').
    case_slips: dict[str, str] = {}
    for w in established:
        top, top_k = forms[w][0]
        if shape(top) != TITLE:
            continue
        for form, k in forms[w][1:]:
            held = form[:2].isupper() and form[2:].islower() and len(form) > 2
            if k <= RARE and held and top_k >= min_reference_ratio(len(w)) * k:
                case_slips[form] = w
    # A space typed one letter off leaves a rare word that is an established one with a letter more or less.
    est = set(established)
    cut = {e[:-1] for e in established}
    spaced = {w for w in rare if w[1:] in est or w[:-1] in est or w in cut}
    # Only the values holding one of these words are read one by one.
    wanted = np.array([w in best_ref or w in spaced for w in vocab.words], dtype=bool)
    if case_slips:
        wanted_forms = np.array([w in case_slips for w in vocab.written], dtype=bool)
        hit = wanted[vocab.folded] | wanted_forms[vocab.codes]
    else:
        hit = wanted[vocab.folded]
    chosen = set(vocab.parents[hit].tolist())
    out: list[Slip] = []
    for v in sorted(chosen):
        text = str(values[v].as_py())
        runs = letter_runs(text)
        found: Slip | None = None
        for _, word in runs:
            key = word.casefold()
            pair = best_ref.get(key)
            if pair is not None and not (pair[0].startswith(key) and text.rstrip().endswith(word)):
                ref, kind = pair
                llr = evidence(ref, kind, word)
                if found is None or llr > found.llr:
                    found = Slip(v, word, _recase(usual(ref), word), kind, llr)
            case_ref = case_slips.get(word)
            if case_ref is not None:
                llr = evidence(case_ref, "case", word)
                if found is None or llr > found.llr:
                    found = Slip(v, word, usual(case_ref), "case", llr)
        # Space slips: two words whose space moved by one letter ('Golde nLager' for 'Golden Lager').
        for (start_a, a), (start_b, b) in pairwise(runs):
            if start_b != start_a + len(a) + 1 or text[start_b - 1] != " ":
                continue
            fixed = _respaced(a, b, df)
            if fixed is None or min(df.get(a.casefold(), 0), df.get(b.casefold(), 0)) > RARE:
                continue
            x, y = fixed
            ref = x if df[x] <= df[y] else y  # the rarer of the two words restored carries the claim
            llr = evidence(ref, "space", a + b)
            if found is None or llr > found.llr:
                found = Slip(v, f"{a} {b}", f"{usual(x)} {usual(y)}", "space", llr)
        if found is not None:
            found.llr -= float(repeat_discount(np.array([rows[v]]), typical, cal)[0])
            out.append(found)
    shift = column_odds(out, kind_llr, legit_share)
    for s in out:
        s.llr += shift
    return out


def column_odds(slips: list[Slip], kind_llr: dict[str, float], legit_share: dict[str, float]) -> float:
    """How much likelier than the word model says a candidate of this column is a slip, read off the kinds
    the candidates take: slips are mostly swaps, doubled letters and neighbouring keys, legitimate look-alikes
    mostly another vowel or consonant, a letter more or less. A column whose candidates read like the latter
    ('Pole', 'Pile' beside 'Pale'; creative names) holds fewer slips than its word counts suggest, and each
    claim there weighs less. The shift (in nats) is its posterior mean under a prior that keeps it near zero
    when there are few candidates."""
    if not slips:
        return 0.0
    kinds = [s.kind for s in slips]
    base = np.array([s.llr - kind_llr[k] for s, k in zip(slips, kinds, strict=True)])
    typo = np.array([TYPO_KINDS[k] for k in kinds])
    legit = np.array([legit_share[k] for k in kinds])
    p = 1.0 / (1.0 + np.exp(-(base[None, :] + _SHIFTS[:, None])))
    fit = np.log(p * typo + (1.0 - p) * legit).sum(axis=1) - 0.5 * (_SHIFTS / ODDS_PRIOR_SD) ** 2
    weight = np.exp(fit - fit.max())
    return float((weight * _SHIFTS).sum() / weight.sum())


_SHIFTS = np.linspace(-6.0, 6.0, 121)


def _recase(reference: str, written: str) -> str:
    """The reference in the written word's case where that is one of the plain shapes."""
    s = shape(written)
    if s == UPPER:
        return reference.upper()
    if s == LOWER:
        return reference.lower()
    return reference


def _respaced(a: str, b: str, df: dict[str, int]) -> tuple[str, str] | None:
    """The two established words (case-folded) the pair makes once its space moves back by one letter."""
    for x, y in ((a + b[:1], b[1:]), (a[:-1], a[-1:] + b)):
        kx, ky = x.casefold(), y.casefold()
        if min(len(kx), len(ky)) >= MIN_WORD and min(df.get(kx, 0), df.get(ky, 0)) >= ESTABLISHED:
            return kx, ky
    return None


def detect_word_slips(f: ColumnFacts, cal: Calibration = DEFAULT) -> Finding | None:
    """Values holding a word that reads as a slip of a word their column writes far more often."""
    if not f.pairwise_ok or f.n_present < MIN_VALUES:
        return None
    ids = np.flatnonzero(f.present & (f.counts > 0) & f.has_letter)
    if ids.size < MIN_VALUES or f.counts[ids].sum() < 0.5 * f.n_present:
        return None  # too few values, or a column of numbers and codes
    values = f.column.dictionary.take(pa.array(ids))
    found = find_slips(values, f.counts[ids], f.typical_count, cal)
    slips = [s for s in found if s.llr > 0]
    if not slips:
        return None
    sel = np.array([ids[s.value] for s in slips], dtype=np.int64)
    texts = dict(zip(sel.tolist(), f.column.texts(sel), strict=True))
    llr = np.minimum(np.array([s.llr for s in slips]), cal.typo_llr)
    name = f.name
    by_value = {texts[int(ids[s.value])]: s for s in slips}
    slip_params = {v: [s.written, s.reference, s.kind] for v, s in sorted(by_value.items())}
    # The value with its slip put right: what a fix writes instead (the follow-up's and the rules' mapping).
    respelled = {v: _respell(v, s) for v, s in by_value.items()}

    def describe(fd: Finding) -> str:
        shown = [v for v in fd.stats["bad_values"] if v in by_value][:4]
        return (
            f"{plural(fd.n_cells, 'value')} in '{name}' ({len(fd.stats['bad_values']):,} distinct) "
            f"{agree(fd.n_cells, 'holds', 'hold')} a word the column rarely writes that reads as a slip of a "
            "word it writes far more often: "
            + "; ".join(f"'{by_value[v].written}' → '{by_value[v].reference}' (in '{v}')" for v in shown)
            + "."
        )

    finding = value_finding(
        f,
        sel,
        llr,
        np.array([s.llr for s in slips]),
        type="inconsistent_category",
        columns=[name],
        title=f"Misspelled words in {name}",
        description="",
        describe=describe,
        suggested_action="Correct the misspelled words (the column's usual spelling is shown) at the source.",
        category="smart_fixes",
        detector="typos-words",
        stat_name="evidence of a slip (nats)",
        stats={
            "column": name,
            "rule": "word_slip",
            "bad_values": sorted(slip_params)[:MAX_LISTED],
            "slips": dict(list(slip_params.items())[:MAX_LISTED]),
            "canonical": {v: respelled[v] for v in list(slip_params)[:MAX_LISTED]},
            "established": ESTABLISHED,
            "rare": RARE,
            "missing_markers": f.markers,
        },
        key=f"words:{name}",
    )
    by_code = {i: respelled[v] for i, v in texts.items()}
    finding.expected = [by_code.get(int(c)) for c in f.column.codes[finding.rows]]
    return finding


def _respell(value: str, s: Slip) -> str:
    """The value with the slip put right (the first occurrence of the word as written)."""
    if s.kind == "space":
        return value.replace(s.written, s.reference, 1)
    return re.sub(rf"(?<![^\W\d_]){re.escape(s.written)}(?![^\W\d_])", s.reference, value, count=1)
