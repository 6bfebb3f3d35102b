"""Inconsistent spellings: rare values one small edit (or only case/spacing) away from a much more frequent one."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from iterate.detect.calibration import DEFAULT
from iterate.detect.context import ColumnFacts
from iterate.detect.findings import MAX_LISTED, Finding, cells
from iterate.detect.lists import list_delimiter, split_items
from iterate.detect.textdist import DeletionIndex, bounded_distance, digits_of, plausible_typo, qgrams
from iterate.wording import agree, plural

MIN_FREQUENT = 3  # a value must be seen this often to be a reference spelling
MAX_CANDIDATES = 20  # references checked by edit distance per value, the ones sharing the most grams
_PUNCT = re.compile(r"[\s\W_]+", re.UNICODE)


def min_reference_ratio(length: int) -> float:
    """How much more frequent the reference must be (of a value, or of a word in words.py): short spellings
    sit close together legitimately."""
    if length <= 3:
        return 20.0
    if length <= 5:
        return 8.0
    return 3.0


def _max_edits(length: int) -> int:
    if length >= 20:
        return 3
    if length >= 9:
        return 2
    return 1


def _normal(s: str) -> str:
    return " ".join(s.casefold().split())


def _spacing(s: str) -> str:
    return " ".join(s.split())


SHORT_CODE = 2  # values this short are codes: any two of them are one substitution apart


def _short_swap(variant: str, reference: str) -> bool:
    """A character of a code of one or two characters put for another (U for A, c for r): another code, not a
    slip, as every two such codes are one edit apart. A dropped, added or swapped character (L or LI for IL)
    keeps the code's characters and stays a slip."""
    a, b = variant.casefold(), reference.casefold()
    return len(a) == len(b) <= SHORT_CODE and a != b and sorted(a) != sorted(b)


def _case_meaningful(values: list[str], counts: np.ndarray) -> bool:
    """Whether the column's case carries meaning (units: S is the siemens, s the second): its values are
    written both all in capitals and all in small letters, each way in at least a tenth of the rows and by
    at least two values. In a column written one way (city names in capitals, codes in small letters, words
    in title case) a value in another case is a variant of the same value."""
    upper = lower = total = 0
    n_upper = n_lower = 0
    for v, c in zip(values, counts.tolist(), strict=True):
        letters = [ch for ch in v if ch.isalpha()]
        if not letters or c <= 0:
            continue
        total += c
        if all(ch.isupper() for ch in letters):
            upper, n_upper = upper + c, n_upper + 1
        elif all(ch.islower() for ch in letters):
            lower, n_lower = lower + c, n_lower + 1
    return n_upper >= 2 and n_lower >= 2 and min(upper, lower) >= 0.1 * total


# Words that name an organisation's legal form or trade rather than the organisation (ACME, ACME Corp.,
# ACME MFG CO are one company): generic vocabulary of company names, not values of any dataset.
LEGAL_FORMS = frozenset(
    [
        "inc",
        "incorporated",
        "corp",
        "corporation",
        "co",
        "company",
        "cos",
        "ltd",
        "limited",
        "llc",
        "llp",
        "lp",
        "plc",
        "gmbh",
        "ag",
        "sa",
        "sas",
        "sarl",
        "srl",
        "bv",
        "nv",
        "oy",
        "oyj",
        "ab",
        "pty",
        "pte",
        "kk",
        "mfg",
        "manufacturing",
        "industries",
        "industrie",
        "industry",
        "intl",
        "international",
        "holding",
        "holdings",
        "group",
    ]
)
# What sets one unit of a chain or a series apart from its namesake: a trailing roman numeral (TACO KING V),
# a number sign (STORE #12) or a part after a dash (HOTEL - SPA, a separately run premises).
_UNIT_MARK = re.compile(
    r"(?:\s(?=[ivxlc]+$)(?:x{0,3})(?:ix|iv|v?i{0,3})$|\s#\s*\w+$|\s[-\u2013\u2014]\s+\S.*$)", re.IGNORECASE
)
_THE = re.compile(r"^\s*the\s+|,\s*the\s*$", re.IGNORECASE)  # THE ACME, ACME, THE (not JAVA THE HUT)


ORG_MIN_RATIO = 5.0  # a form this much rarer than the usual one is a slip; closer, the column uses both


def unit_mark(s: str) -> tuple[str, str]:
    """A name split into its base and the mark that tells one unit of a chain or series from another
    (TACO KING V: 'taco king', 'v'; the mark is '' when there is none)."""
    s = s.strip()
    found = _UNIT_MARK.search(s)
    if not found:
        return s.casefold(), ""
    return s[: found.start()].strip().casefold(), found.group(0).strip().casefold()


def _other_unit(a: tuple[str, str], b: tuple[str, str]) -> bool:
    """Two names of one base told apart by their marks: the namesake and a unit (HOTEL, HOTEL - SPA), or two
    numbered units (TACO KING IV, TACO KING V). A slip inside a dash part (HOTEL - SAP) is still a slip."""
    if a[0] != b[0] or a[1] == b[1]:
        return False
    return not a[1] or not b[1] or not (a[1].startswith(("-", "\u2013", "\u2014")) and b[1][:1] == a[1][:1])


def _org_key(s: str) -> tuple[str, bool]:
    """The name without punctuation, case, a leading or trailing-after-comma 'the' and the legal-form words
    that end it ('' when nothing else is left), and whether it had such a form. A legal form inside a name
    is part of the name; a unit mark (TACO KING V, HOTEL - SPA) keeps the name apart from its namesake."""
    stripped = _THE.sub(" ", s)
    words = _PUNCT.sub(" ", stripped.casefold()).split()
    kept = list(words)
    while kept and kept[-1] in LEGAL_FORMS:
        kept.pop()
    had_form = len(kept) < len(words) or stripped != s
    return " ".join(kept), had_form


def org_forms(values: list[str], counts: np.ndarray) -> dict[int, int]:
    """Map value index → the most frequent form of the same organisation, for names that differ from it by
    legal-form words (ACME CORPORATION → ACME); punctuation or case alone is left to the other checks."""
    keyed = [_org_key(v) for v in values]
    best: dict[str, int] = {}
    for i in np.argsort(-counts, kind="stable").tolist():
        key, has_form = keyed[i]
        if key and counts[i] > 0:
            best.setdefault(key, i)
    out: dict[int, int] = {}
    for i, (key, has_form) in enumerate(keyed):
        ref = best.get(key, i) if key else i
        differs = has_form or keyed[ref][1]  # one of the two carries a legal form
        if ref != i and differs and counts[ref] > counts[i] and counts[ref] >= MIN_FREQUENT:
            out[i] = ref
    return out


def find_variants(values: list[str], counts: np.ndarray, n_present: int) -> dict[int, int]:
    """Map rare value index → reference value index for spellings that look like typos of the reference."""
    order = np.argsort(-counts, kind="stable")
    frequent = [int(i) for i in order if counts[i] >= MIN_FREQUENT]
    if not frequent:
        return {}
    top_share = counts[order[0]] / max(n_present, 1)
    result: dict[int, int] = {}
    index = DeletionIndex((i, values[i]) for i in frequent)
    digits = [
        digits_of(v) for v in values
    ]  # a variant keeps its reference's digits: checked before distances

    def same_digits(i: int) -> Callable[[int], bool]:
        return lambda j: digits[j] == digits[i]

    def explained(i: int) -> bool:
        """A frequent value that is itself a variant of a much more frequent one."""
        need = min_reference_ratio(len(values[i])) * counts[i]
        return any(
            j != i and counts[j] >= need and plausible_typo(values[i], values[j])
            for j in index.near(values[i], same_digits(i))
        )

    # A vocabulary whose legitimate values sit one edit apart (N/S CLARK ST, ami-1/ami-2) makes one edit
    # weak evidence: there the reference must be far more frequent before a variant counts as a typo.
    legit = [i for i in frequent if not explained(i)]
    legit_set = set(legit)
    close_peers = sum(
        1 for i in legit if any(j != i and j in legit_set for j in index.near(values[i], same_digits(i)))
    )
    density_factor = 5.0 if close_peers >= max(2, 0.1 * len(legit)) else 1.0
    # 1. Same after case and spacing normalisation (spacing only, where the column's case carries meaning).
    case_meaningful = _case_meaningful(values, counts)
    normal = _spacing if case_meaningful else _normal
    by_norm: dict[str, int] = {}
    for i in order:
        by_norm.setdefault(normal(values[i]), int(i))
    for i in range(len(values)):
        ref = by_norm[normal(values[i])]
        if ref != i and counts[ref] >= 2 * counts[i]:
            result[i] = ref
    # 1b. The same organisation written with and without its legal form, the usual form far more frequent
    # (a rare 'CANADAIR LTD' among 'CANADAIR'). Forms of comparable frequency are reported apart (org_forms).
    forms = org_forms(values, counts)
    for i, ref in forms.items():
        if i not in result and counts[ref] >= ORG_MIN_RATIO * counts[i]:
            result[i] = ref
    # 2. One edit away (substitution, insertion, deletion, transposition): the deletion index over references.
    # 3. A few edits away for longer values: q-gram candidates, then a bounded distance.
    grams = {i: qgrams(values[i]) for i in frequent if len(values[i]) >= 9}
    by_gram: dict[str, list[int]] = {}
    for i, gs in grams.items():
        for g in gs:
            by_gram.setdefault(g, []).append(i)
    top_count = counts[order[0]]
    marks = [unit_mark(v) for v in values]  # TACO KING V is the fifth TACO KING, not a slip for it
    common_gram = max(50, len(grams) // 10)
    for i in range(len(values)):
        if i in result or counts[i] == 0 or counts[i] * 3 > top_count:
            continue  # nothing is frequent enough to be this value's reference spelling
        v = values[i]
        length = len(v)
        if length < 1:
            continue
        need = min_reference_ratio(length) * density_factor * counts[i]
        if length <= 3 and top_share < 0.5:
            continue  # short codes (states, sizes) are dense: one edit apart is normal for them
        best, best_count = -1, 0.0
        for j in index.near(v, same_digits(i)):
            if j == i or counts[j] < need or counts[j] <= best_count or _short_swap(v, values[j]):
                continue  # a short code one substitution from another is another code
            if _other_unit(marks[i], marks[j]):
                continue
            if case_meaningful and v.casefold() == values[j].casefold():
                continue  # S (siemens) beside s (second)
            if plausible_typo(v, values[j]):
                best, best_count = j, counts[j]
        if best < 0 and length >= 9:
            gs = qgrams(v)
            tally: dict[int, int] = {}
            for g in gs:
                posting = by_gram.get(g, ())
                if len(posting) > common_gram:
                    continue  # a gram most values share (a common prefix) tells nothing and costs the most
                for j in posting:
                    tally[j] = tally.get(j, 0) + 1
            k = _max_edits(length)
            # Ties in order of the values (the tally's own order follows the hashing of a set of strings).
            ranked = sorted(tally.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_CANDIDATES]
            for j, shared in ranked:
                if j == i or counts[j] < need or shared < len(gs) * 0.3 or _other_unit(marks[i], marks[j]):
                    continue
                if (
                    counts[j] > best_count
                    and bounded_distance(v, values[j], k) is not None
                    and plausible_typo(v, values[j])
                ):
                    best, best_count = j, counts[j]
        if best >= 0:
            result[i] = best
    return result


def detect_typos(f: ColumnFacts) -> list[Finding]:
    """Inconsistent spellings of the same value, on the values and on their digit-masked forms.

    Only in a column whose values repeat (a vocabulary): where nearly every value appears once (free text,
    e-mails, codes), no spelling is frequent enough to be the reference of another. In a column of lists
    ('IT,FR'), the items are the vocabulary: a list is compared item by item, never as a whole.
    """
    if not f.pairwise_ok or f.n_present < 20:
        return []
    delimiter = list_delimiter(f)
    if delimiter is not None:
        pairs = _list_variants(f, delimiter)
        return _findings(f, pairs) if pairs else []
    if f.typical_count < MIN_FREQUENT:
        return []
    out: list[Finding] = []
    present = f.present & (f.counts > 0)
    uniques = f.column.uniques
    lettered = present & f.has_letter
    # Values with digits are compared too, but only against references with the same digits (see
    # plausible_typo): 37 vs 38 patients is not a typo, Rsik 3 vs Risk 3 is.
    ids = np.flatnonzero(lettered)
    if ids.size >= 2:
        texts = [uniques[i] for i in ids]
        mapping = find_variants(texts, f.counts[ids], f.n_present)
        if mapping:
            out += _findings(f, {int(ids[a]): texts[b] for a, b in mapping.items()})
        both = {
            int(ids[a]): int(ids[b]) for a, b in org_forms(texts, f.counts[ids]).items() if a not in mapping
        }
        if both:
            out.append(_forms_finding(f, both))
    # Digit-masked: "619 paxienxs" against "# patients" seen hundreds of times.
    mcodes, mtext = f.masked_codes
    m_counts = np.bincount(mcodes[lettered], weights=f.counts[lettered], minlength=len(mtext))
    has_digit_mask = np.array(["#" in t for t in mtext], dtype=bool)
    m_ids = np.flatnonzero((m_counts > 0) & has_digit_mask)
    # Only where masking digits reveals a template (`# patients`), not where it merely blurs values (addresses).
    n_digit_values = int((lettered & f.has_digit).sum())
    if m_ids.size >= 2 and m_counts[m_ids].sum() >= 0.5 * f.n_present and m_ids.size <= 0.25 * n_digit_values:
        mapping = find_variants([mtext[i] for i in m_ids], m_counts[m_ids], f.n_present)
        bad_masks = {int(m_ids[a]): int(m_ids[b]) for a, b in mapping.items()}
        already = set()
        for fd in out:
            already |= set(fd.stats["canonical"])
        masked: dict[int, str] = {}
        for u in np.flatnonzero(lettered):
            ref = bad_masks.get(int(mcodes[u]))
            if ref is not None and uniques[u] not in already:
                masked[int(u)] = mtext[ref]
        if masked:
            out.append(_finding(f, masked, masked=True))
    return out


def _list_variants(f: ColumnFacts, delimiter: str) -> dict[int, str]:
    """In a column of lists, the values holding an item that looks like a typo of a far more frequent item
    (value index → the value with those items respelled). Lists of other items ('IT,BR' beside 'IT,FR') are
    other values."""
    uniques = f.column.uniques
    ids = np.flatnonzero(f.present & (f.counts > 0) & f.has_letter)
    items_of: dict[int, list[str]] = {}
    rows_of: dict[str, int] = {}  # item -> rows holding it
    for i in ids.tolist():
        items = split_items(uniques[i], delimiter)
        items_of[i] = items
        for item in set(items):
            rows_of[item] = rows_of.get(item, 0) + int(f.counts[i])
    if len(rows_of) < 2:
        return {}
    names = list(rows_of)
    counts = np.array([rows_of[n] for n in names], dtype=np.int64)
    typical = np.sort(counts)[np.searchsorted(np.cumsum(np.sort(counts)), counts.sum() / 2)]
    if typical < MIN_FREQUENT:
        return {}
    mapping = find_variants(names, counts, int(counts.sum()))
    if not mapping:
        return {}
    respelled = {names[a]: names[b] for a, b in mapping.items()}
    out: dict[int, str] = {}
    for i, items in items_of.items():
        if any(item in respelled for item in items):
            parts = uniques[i].split(delimiter)
            out[i] = delimiter.join(
                p.replace(p.strip(), respelled[p.strip()]) if p.strip() in respelled else p for p in parts
            )
    return out


def _findings(f: ColumnFacts, pairs: dict[int, str]) -> list[Finding]:
    """Variants of frequent values: those that differ from their reference only by case and spacing are the
    same value written unlike the column (a quick fix, low severity); the others are misspellings."""
    uniques = f.column.uniques
    written = {i: v for i, v in pairs.items() if _normal(uniques[i]) == _normal(v)}
    spelt = {i: v for i, v in pairs.items() if i not in written}
    return [_finding(f, p, masked=False, case=p is written) for p in (spelt, written) if p]


def _finding(f: ColumnFacts, pairs: dict[int, str], *, masked: bool, case: bool = False) -> Finding:
    """Variants (value index → the spelling expected instead, or the masked template it should follow).
    `case`: variants only by case and spacing (`NORTH`, ` North` for `North`)."""
    uniques = f.column.uniques
    ids = np.array(sorted(pairs), dtype=np.int64)
    rows, cols = cells(f.column.rows_of(ids), f.index)
    canonical = {uniques[i]: pairs[i] for i in pairs}
    # A variant equal to its reference but for case and spacing is surer than one a few edits away.
    per_id = {
        i: DEFAULT.case_variant_llr if _normal(uniques[i]) == _normal(pairs[i]) else DEFAULT.typo_llr
        for i in pairs
    }
    llr = np.array([per_id[int(c)] for c in f.column.codes[rows]], dtype=np.float64)
    codes = f.column.codes[rows]
    # How many rows write the variant, against its reference: a slip is seldom made the same way many times
    # (`Stratovolcanoes` in nine rows is a plural the column uses); the decision weighs both (fitted).
    wanted = set(pairs.values())
    pos = {u: k for k, u in enumerate(uniques) if u in wanted} if not masked else {}
    reference = {i: pos.get(v) for i, v in pairs.items()}
    rows_of = np.log(np.maximum(f.counts[codes].astype(np.float64), 1.0))
    ratio = np.array(
        [
            np.log(max(float(f.counts[reference[int(c)]]), 1.0) / max(float(f.counts[int(c)]), 1.0))
            if reference.get(int(c)) is not None
            else 0.0
            for c in codes
        ]
    )
    expected = None if masked else [canonical[uniques[int(f.column.codes[r])]] for r in rows]
    what = "unit or label text" if masked else "case or spacing" if case else "spellings"
    return Finding(
        type="inconsistent_category",
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=f"Inconsistent {what} in {f.name}",
        description="",
        describe=lambda fd: (
            f"{plural(fd.n_cells, 'value')} in '{f.name}' ({len(fd.stats['canonical']):,} distinct) "
            + (
                f"{agree(fd.n_cells, 'writes', 'write')} a frequent value with other case or spacing: "
                if case
                else f"{agree(fd.n_cells, 'looks', 'look')} like misspellings or variants of far more frequent values: "
            )
            + "; ".join(f"'{k}' → '{v}'" for k, v in list(fd.stats["canonical"].items())[:4])
            + "."
        ),
        suggested_action=(
            "Rewrite each variant the column's way (the frequent value's case and spacing)."
            if case
            else "Map each variant to its standard spelling (the frequent value) and prevent free typing of "
            "this field at the source."
        ),
        category="quick_fixes" if case else "smart_fixes",
        damage="format" if case else "",
        detector="typos-masked" if masked else "typos",
        stats={
            "column": f.name,
            "bad_values": sorted(canonical)[:MAX_LISTED],
            "canonical": dict(list(canonical.items())[:MAX_LISTED]),
        },
        expected=expected,
        key=f"{'case' if case else 'typos'}{'-masked' if masked else ''}:{f.name}",
        llr=llr,
        features={"rows": rows_of, "ratio": ratio},
    )


def _forms_finding(f: ColumnFacts, pairs: dict[int, int]) -> Finding:
    """One organisation written in forms the column uses side by side (AIRBUS / AIRBUS INDUSTRIE): a fact
    about the column to settle, not wrong cells: neither form is the wrong one."""
    uniques = f.column.uniques
    ids = np.array(sorted(pairs), dtype=np.int64)
    rows, cols = cells(f.column.rows_of(ids), f.index)
    canonical = {uniques[i]: uniques[pairs[i]] for i in pairs}
    return Finding(
        type="inconsistent_category",
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=f"One name written in several forms in {f.name}",
        description="",
        describe=lambda fd: (
            f"'{f.name}' writes the same name in other forms (a legal form or a leading 'the' added or "
            f"dropped, punctuation, spacing) in {fd.n_cells:,} rows: "
            + "; ".join(f"'{k}' beside '{v}'" for k, v in list(fd.stats["canonical"].items())[:4])
            + ". Counts and joins by this column split one organisation in two."
        ),
        suggested_action="Choose one form per organisation and map the others to it.",
        category="smart_fixes",
        detector="typos",
        stats={
            "column": f.name,
            "bad_values": sorted(canonical)[:MAX_LISTED],
            "canonical": dict(list(canonical.items())[:MAX_LISTED]),
        },
        key=f"forms:{f.name}",
        flag=False,
    )
