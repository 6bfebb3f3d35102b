"""Entities: columns that determine others (zip → city, player → birth year), judged group by group.

Rows that share a value of a determining column X describe one entity (a hospital, a player, a day), and
the entity's consensus on a dependent column Y is its true value. Each dependency X → Y is modelled as
"Y is the group's value, except for noise at rate ε, drawn from the values that show up as noise", against
"Y does not depend on X here"; both ε and the noise distribution are estimated from the table. That gives,
per group, how sure we are that X determines Y there, and per cell, how sure we are that the group's
consensus (not the cell) is right — even when the dependency holds on a small share of all rows (a noisy
column) or when the same wrong value is repeated within one entity.

A row that disagrees with its X group on two or more dependents more likely carries a wrong X (a key with a
typo, a code pasted into the wrong record) than two wrong dependents: the X cell is blamed, and the
consensus of every X → Y is then taken without the blamed cells of Y.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from iterate.detect.calibration import DEFAULT, Calibration, logit
from iterate.detect.context import ColumnFacts, missing_markers
from iterate.detect.discovery import (
    MIN_GROUP,
    Composite,
    Dependency,
    Matching,
    determinant,
    discover,
    group_majority,
    match_pairs,
    present_codes,
)
from iterate.detect.findings import Finding
from iterate.detect.stats import poisson_tail
from iterate.grouping import unique
from iterate.table import code_dtype, wide

MAX_ROWS_LISTED = 50_000  # rows a dependency finding lists for code to recount; beyond, the rule alone
MIN_MATCHED_PAIRS = 10  # a one-to-one pairing is learned from at least this many pairs


@dataclass
class Entity:
    """X's one-to-one partner column: its per-row codes and the matching X ↔ partner."""

    partner_codes: np.ndarray
    matching: Matching


@dataclass
class Consensus:
    """One dependency X → Y measured on every row: each row's evidence against its Y value."""

    dep: Dependency
    llr: np.ndarray  # per row: evidence that the Y cell is wrong (negative: the group vouches for it)
    covered: np.ndarray  # per row: a group of MIN_GROUP+ rows judged the cell
    deviant: np.ndarray  # per row: judged, and the cell is not its group's consensus
    expected: np.ndarray  # per row: the group's consensus, as a dictionary code of Y (-1 where none)
    rates: dict[str, float]  # how often the dependency's groups deviate, by kind
    group_mode: np.ndarray | None = (
        None  # per X code: the group's consensus, as a key of Y's meanings (-1: the group judges no one)
    )
    pasted: Pasted | None = None  # a value pasted across the groups, judged apart (see pasted_value)


def consensus(
    fx: ColumnFacts | Composite,
    fy: ColumnFacts,
    dep: Dependency,
    cal: Calibration,
    excluded: np.ndarray | None = None,
    entity: Entity | None = None,
    others: Sequence[ColumnFacts | Composite] = (),
) -> Consensus:
    """Evidence per row against Y's value, from its X group (rows in `excluded` neither count nor are judged):
    see _group_consensus. A value pasted as the odd faction across many entities (see pasted_value; `others`:
    Y's other determinants) is judged apart: its factions neither count toward their groups nor make them
    split, and each of its rows is a deviant as telling as the dependency is strict without them."""
    c = _group_consensus(fx, fy, dep, cal, excluded, entity)
    pasted = pasted_value(fx, fy, cal, excluded, others)
    if pasted is None:
        return c
    rows = pasted.rows
    out = _group_consensus(fx, fy, dep, cal, rows if excluded is None else rows | excluded, entity)
    if out.rates["split_groups"] > cal.paste_other_share:
        return c  # loose even without the value: its factions may be the entities' own second values
    x, y = present_codes(fx), fy.meaning.codes
    xr = np.maximum(x, 0)
    kept = (x >= 0) & (y >= 0) & ~rows
    if excluded is not None:
        kept &= ~excluded
    n_x = fx.column.n_unique
    own = group_majority(np.where(kept, x, -1), np.maximum(y, 0), n_x, fy.meaning.n_keys).major_count
    moved = np.bincount(xr[rows], minlength=n_x)
    assert out.group_mode is not None
    judged = rows & (out.group_mode[xr] >= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mode_share = np.log(own[xr] / np.maximum(own[xr] + moved[xr], 1))
    strict = logit(max(1.0 - out.rates["split_groups"], cal.dependency_floor))
    llr = np.where(
        judged, np.clip(strict + mode_share, -cal.dependency_llr_cap, cal.dependency_llr_cap), out.llr
    )
    spelled = np.where(judged, fy.meaning.spelling[np.maximum(out.group_mode[xr], 0)], out.expected).astype(
        out.expected.dtype, copy=False
    )
    rates = dict(out.rates, pasted_groups=pasted.share)
    covered, deviant = out.covered | judged, out.deviant | judged
    return Consensus(dep, llr, covered, deviant, spelled, rates, out.group_mode, pasted)


@dataclass
class Pasted:
    value: int  # the value's meaning key
    rows: np.ndarray  # its rows in groups whose consensus is another value
    share: float  # the groups it splits, as a share of the groups big enough to judge
    groups: int = 0  # how many groups it splits


def pasted_value(
    fx: ColumnFacts | Composite,
    fy: ColumnFacts,
    cal: Calibration,
    excluded: np.ndarray | None = None,
    others: Sequence[ColumnFacts | Composite] = (),
) -> Pasted | None:
    """A value pasted into many entities as their odd faction (a city pasted into a sixth of many teams' rows).

    An entity that legitimately holds a second value (a player's several seasons, a person's changing
    address) holds its own: the dependency's factions spread over many values. When instead the factions are
    one and the same value, in more groups than that value's share of the entities would put it there by
    chance (its share among the values a group could take other than its own; a two-valued Y always splits
    into its other value), the value is the consensus of some other group, and other values split at most
    `paste_other_share` as many groups, its factions are a bulk paste rather than second values. Y's other
    determinants must not say otherwise: a pasted row is an ordinary record of its entity but for Y, while a
    record of another kind (a penguin of another species among those of one flipper length) is told apart by
    them too: at most `paste_other_share` of the rows they group may sit in groups whose majority is the value.
    """
    x, y = present_codes(fx), fy.meaning.codes
    use = (x >= 0) & (y >= 0)
    if excluded is not None:
        use &= ~excluded
    n_x, n_y = fx.column.n_unique, fy.meaning.n_keys
    xu = np.where(use, x, -1)
    gm = group_majority(xu, np.maximum(y, 0), n_x, n_y)
    xr = np.maximum(xu, 0)
    sized = gm.size >= MIN_GROUP
    minority = use & sized[xr] & (y != gm.major[xr])
    if not minority.any():
        return None
    keys, counts = unique(xu[minority].astype(np.int64) * n_y + y[minority], return_counts=True)
    factions = keys[counts >= 2]  # a value held by two or more rows of a group whose consensus is another
    if factions.size == 0:
        return None
    gx, gy = factions // n_y, factions % n_y
    per_value = np.bincount(gy, minlength=n_y)
    v = int(per_value.argmax())
    k = int(per_value[v])
    other_groups = int(np.unique(gx[gy != v]).size)
    n_sized = int(sized.sum())
    if other_groups > cal.paste_other_share * k:
        return None
    owners = sized & (gm.major == v)
    if not owners.any():
        return None  # not a value any entity holds: left to the other detectors
    # By chance, a group's faction is v as often as v is the value of the entities (rows of groups whose
    # consensus it is), among the values other than the group's own.
    held = np.bincount(gm.major[sized], weights=gm.size[sized], minlength=n_y)
    share = held / max(float(held.sum()), 1.0)
    split = np.unique(gx)
    p = np.clip(share[v] / np.maximum(1.0 - share[gm.major[split]], 1e-12), 0.0, 1.0)
    if float(poisson_tail(np.array([k]), np.array([p.sum()]))[0]) >= cal.split_tail:
        return None
    rows = use & (y == v) & sized[xr] & (gm.major[xr] != v)
    seen = held_v = 0
    for fz in others:
        z = present_codes(fz)
        zu = np.where((z >= 0) & (y >= 0), z, -1)
        gz = group_majority(zu, np.maximum(y, 0), fz.column.n_unique, n_y)
        zr = np.maximum(zu, 0)
        grouped = rows & (zu >= 0) & (gz.size[zr] >= MIN_GROUP)
        seen += int(grouped.sum())
        held_v += int((grouped & (gz.major[zr] == v)).sum())
    if held_v > cal.paste_other_share * seen:
        return None
    return Pasted(v, rows, k / max(n_sized, 1), k)


def _group_consensus(
    fx: ColumnFacts | Composite,
    fy: ColumnFacts,
    dep: Dependency,
    cal: Calibration,
    excluded: np.ndarray | None = None,
    entity: Entity | None = None,
) -> Consensus:
    """Evidence per row against Y's value, from its X group (rows in `excluded` neither count nor are judged).

    Each group is one entity with one true value, or an entity that legitimately holds several (a chain's
    licenses, the seasons a player played). How often this dependency's groups hold several is read from
    the factions they split into: a faction too large to be noise. Then, for a row off its group's consensus:
    - in a group that shows no split: wrong unless the entity is one of the multi-valued kind the table
      shows at that rate: evidence -log(split rate) (strong for a strict dependency, none for a loose one);
    - in a faction that is a split: wrong as often as this dependency's groups do not split;
    - a lone value in a group that shows a split: the entity holds several values; no evidence.
    A row agreeing with its group's consensus is vouched for as much as the dependency holds.

    Where X is paired one-to-one with another column P (`entity`: a player's name with their surname), a
    group's consensus is taken from its own rows — those holding X's matched P value — and a row whose P
    value is matched to another X belongs to another entity: off the consensus, that is strong evidence,
    however many rows were pasted that way (a surname pasted over a whole season of another player).
    """
    # Y is compared by what its values say: spellings of one value (7:10 a.m., 7:10am) agree.
    x, y = present_codes(fx), fy.meaning.codes
    n = x.size
    use = (x >= 0) & (y >= 0)
    if excluded is not None:
        use &= ~excluded
    n_x, n_y = fx.column.n_unique, fy.meaning.n_keys
    # Everything below is a function of a row's state: its (X, Y) pair, whether Y is spelled the usual way,
    # and (with an entity) its partner's value. It is computed once per distinct state, counted by its rows
    # (`w`), and handed to the rows at the end: a long column has far fewer states than rows, and the per-row
    # arrays of the computation (a dozen, 8 bytes a row each) were the dependency detector's peak.
    at = np.flatnonzero(use)
    kx, ky = wide(x[at]), wide(y[at])
    state = (kx * n_y + ky) * 2 + (fy.column.codes[at] == fy.meaning.spelling[ky])
    del kx, ky
    if entity is not None:
        # With the partner's value too: the states renumbered first (their keys could pass 64 bits), and
        # each state's pair read back from its first row.
        _, state = unique(state, return_inverse=True)
        kp = wide(entity.partner_codes[at]) + 1  # 0: no partner value
        n_p = int(kp.max()) + 1 if kp.size else 1
        state = state.reshape(-1).astype(np.int64) * n_p + kp
        del kp
        keys, first, inverse, w = unique(state, return_index=True, return_inverse=True, return_counts=True)
        kx, ky = wide(x[at[first]]), wide(y[at[first]])
        ku = fy.column.codes[at[first]] == fy.meaning.spelling[ky]
        kp = keys % n_p - 1
    else:
        keys, inverse, w = unique(state, return_inverse=True, return_counts=True)
        ku = (keys % 2).astype(bool)
        kx, ky = (keys // 2) // n_y, (keys // 2) % n_y
    del state
    inverse = inverse.reshape(-1)
    w = w.astype(np.int64, copy=False)
    gm = group_majority(kx, ky, n_x, n_y, weights=w)
    size, mode, k1 = gm.size, gm.major, gm.major_count
    g_mode = mode[kx]
    g_k1 = k1[kx]
    # Rows sharing the state's (X, Y) pair (its faction in the group).
    _, pair_of = unique(kx * n_y + ky, return_inverse=True)
    pair_of = pair_of.reshape(-1)
    pair_count = np.bincount(pair_of, weights=w).astype(np.int64)[pair_of]
    # A group judges when it has a consensus: enough rows, its most common value held by most of them and
    # at least twice as common as any other (a group of many large factions, every respondent without an
    # affair, judges nobody).
    judging = (size >= MIN_GROUP) & (k1 >= 2) & (2 * k1 > size) & (k1 >= 2 * gm.second_count)
    foreign = np.zeros(keys.size, dtype=bool)
    if entity is not None:
        owned = entity.matching.x_to_y[kx]
        own = (kp >= 0) & (owned >= 0) & (kp == owned)
        gmo = group_majority(np.where(own, kx, -1), ky, n_x, n_y, weights=w)
        has = (gmo.size >= 2) & (2 * gmo.major_count > gmo.size) & (gmo.major_count >= 2 * gmo.second_count)
        mode = np.where(has, gmo.major, mode)
        k1 = np.where(has, gmo.major_count, k1)
        g_mode = mode[kx]
        g_k1 = k1[kx]
        judging = np.where(has, size >= MIN_GROUP, judging)
        belongs = entity.matching.y_to_x[np.maximum(kp, 0)]
        foreign = ~own & (kp >= 0) & (belongs >= 0) & (belongs != kx) & has[kx] & (ky != g_mode)
    judged = judging[kx]
    deviant = judged & (ky != g_mode)
    n_judged = max(int(w[judged].sum()), 1)
    # A faction noise would rarely produce. Noise is what scatters: its rate is read from the rows that
    # deviate alone in their group (all deviation would count the legitimate factions as noise), and it is
    # spread over values as the deviants are.
    dev_rate = float(np.clip(w[deviant].sum() / n_judged, 1e-3, 0.5))
    noise_rate = float(np.clip(w[deviant & (pair_count == 1)].sum() / n_judged, 1e-3, 0.5))
    dev_counts = np.bincount(ky[deviant], weights=w[deviant], minlength=n_y).astype(np.float64)
    q_noise = (dev_counts + 1.0) / (dev_counts.sum() + n_y)
    # Only a deviant can be a split: the Poisson tail is computed on those states alone.
    off = np.flatnonzero(deviant)
    lam = size[kx[off]] * noise_rate * q_noise[ky[off]]
    split = np.zeros(keys.size, dtype=bool)
    split[off] = poisson_tail(pair_count[off], lam) < cal.split_tail
    del off, lam
    split_groups = np.zeros(n_x, dtype=bool)
    split_groups[kx[split]] = True
    # How often X's groups hold several values: groups with a split faction, and groups with no consensus at
    # all (many large factions), as a share of the rows in groups big enough to show it. A column that is
    # not a key (a measure shared by many records) has big mixed groups, and that is what makes it loose.
    sized = size >= MIN_GROUP
    multi = sized & (split_groups | ~judging)
    split_rate = float(np.clip(size[multi].sum() / max(size[sized].sum(), 1), 0.0, 1 - 1e-3))
    lone = deviant & ~split
    in_split_group = split_groups[kx]
    rates = {"split_groups": split_rate, "deviation": dev_rate, "noise": noise_rate}
    floor = cal.dependency_floor
    # How sure the group is of its consensus against the cell's own faction.
    with np.errstate(divide="ignore", invalid="ignore"):
        mode_share = np.log(g_k1 / np.maximum(g_k1 + pair_count, 1))
    # Lone deviations are as telling as they are rare for this dependency: in a strict one (a hospital's
    # city) nearly every row agrees, in a loose one (the visibility at three airports in one hour) many rows
    # differ legitimately, one at a time.
    lone_rate = float(np.clip(w[lone & ~in_split_group].sum() / n_judged, floor, 0.5))
    rates["lone"] = lone_rate
    llr = np.zeros(keys.size)
    llr = np.where(lone & ~in_split_group, -math.log(lone_rate + split_rate) + mode_share, llr)
    llr = np.where(lone & in_split_group, mode_share, llr)
    llr = np.where(split, logit(max(1 - split_rate, floor)) + mode_share, llr)
    # A row of another entity: as telling as such rows are rare among this column's entities (groups).
    if foreign.any():
        hosts = np.zeros(n_x, dtype=bool)
        hosts[kx[foreign]] = True
        # Rows of other entities are rare either way they are counted: by the groups that host them (a
        # surname pasted over a whole season of one player) or by the rows (values swapped one at a time,
        # so that nearly every group hosts one); the rarer of the two says how telling one is.
        foreign_rate = min(float(w[foreign].sum() / n_judged), float(hosts.sum() / max(int(sized.sum()), 1)))
        rates["foreign_groups"] = foreign_rate
        llr = np.where(foreign, np.maximum(llr, -math.log(foreign_rate + floor) + mode_share), llr)
    # A deviant holding the column's usual value in a group whose consensus is unusual (FALSE, 99% of the
    # column, in a group mostly TRUE) is as telling as such groups rarely hold the usual value: an attribute
    # of the record rather than of the entity (a weekend inspection) shows up there often.
    y_mode = int(np.bincount(ky, weights=w, minlength=n_y).argmax()) if keys.size else -1
    unusual = judged & (g_mode != y_mode)
    back = deviant & unusual & (ky == y_mode)
    if back.any():
        back_rate = float(w[back].sum() / max(int(w[unusual].sum()), 1))
        rates["usual_in_unusual"] = back_rate
        llr = np.where(back, np.minimum(llr, -math.log(back_rate + floor)), llr)
    # A row that agrees with its group is vouched for only as written the usual way: 'electronics ' agrees
    # with 'Electronics' on meaning, but its spelling is not the group's to vouch for.
    llr = np.where(judged & ~deviant & ku, math.log(split_rate + floor), llr)
    llr = np.clip(llr, -cal.dependency_llr_cap, cal.dependency_llr_cap)
    # The consensus is shown by its most common spelling (a dictionary code of Y).
    spelled = np.where(judged, fy.meaning.spelling[np.maximum(g_mode, 0)], -1).astype(
        code_dtype(fy.column.n_unique), copy=False
    )  # a dictionary code of Y: int32 wherever Y's dictionary fits (kept per row while the dependency is)
    # To the rows: a row outside every state (missing X or Y, excluded) is neither judged nor judging.
    row_llr = np.zeros(n)
    row_llr[at] = llr[inverse]
    row_judged = np.zeros(n, dtype=bool)
    row_judged[at] = judged[inverse]
    row_deviant = np.zeros(n, dtype=bool)
    row_deviant[at] = deviant[inverse]
    row_spelled = np.full(n, -1, dtype=spelled.dtype)
    row_spelled[at] = spelled[inverse]
    return Consensus(dep, row_llr, row_judged, row_deviant, row_spelled, rates, np.where(judging, mode, -1))


@dataclass
class Judgement:
    """Per row, for one dependent column, what the other detectors ask of the dependencies once they are done:
    the sum of what the dependencies that agree with the cell say for it (<= 0; 0 where none vouches).

    (The votes, cover and combined evidence a judgement is made of stay inside detect_dependency_violations:
    kept for every dependent column until the detection ends, they were 16 bytes a row more, 48 MB a dependent
    column on 3M rows, for nothing read after.)"""

    vouch: np.ndarray


@dataclass
class Entities:
    """What the dependencies concluded: findings, the dependencies, and per dependent column the judgement."""

    findings: list[Finding]
    dependencies: list[Dependency]
    judgements: dict[int, Judgement] = field(default_factory=dict)


Memo = dict[tuple[tuple[int, ...], int, bool], "Consensus"]


def _memo_key(d: Dependency, entity: Entity | None) -> tuple[tuple[int, ...], int, bool]:
    return (d.determinants, d.rhs, entity is not None)


def _measured(
    facts: list[ColumnFacts],
    d: Dependency,
    deps: Sequence[Dependency],
    cal: Calibration,
    memo: Memo,
    entity: Entity | None = None,
    excluded: np.ndarray | None = None,
) -> Consensus:
    """consensus(), computed once per dependency and entity pairing (with rows excluded: afresh). `deps`: all
    the dependencies, for Y's other determinants."""
    key = _memo_key(d, entity)
    if excluded is None and key in memo:
        return memo[key]
    others = [determinant(facts, e) for e in deps if e.rhs == d.rhs and e is not d]
    c = consensus(determinant(facts, d), facts[d.rhs], d, cal, excluded, entity, others)
    if excluded is None:
        memo[key] = c
    return c


def entities(
    facts: list[ColumnFacts], deps: list[Dependency], cal: Calibration = DEFAULT, memo: Memo | None = None
) -> dict[int, Entity]:
    """For each column paired one-to-one with another (both determine each other, each way with most rows in
    groups that keep to one value, and the matched pairs hold most rows), its partner: the one whose matched
    pairs hold the most rows."""
    found = {(d.lhs, d.rhs): d for d in deps if not d.more}
    best: dict[int, tuple[int, Entity]] = {}
    for a, b in sorted(found):
        if a < b and (b, a) in found:
            memo = {} if memo is None else memo
            loose = [
                _measured(facts, found[(x, y)], deps, cal, memo).rates["split_groups"]
                for x, y in ((a, b), (b, a))
            ]
            if max(loose) >= 0.5:
                continue  # two measures that often share values (an incentive and a deductible), not keys
            m = match_pairs(facts[a], facts[b])
            # One-to-one only where the matched pairs hold most rows (player ↔ surname), not where two
            # columns merely predict each other (relationship ↔ sex).
            x, y = present_codes(facts[a]), present_codes(facts[b])
            use = (x >= 0) & (y >= 0)
            held = int((use & (m.x_to_y[np.maximum(x, 0)] == y)).sum())
            if held < 0.5 * use.sum() or (m.x_to_y >= 0).sum() < MIN_MATCHED_PAIRS:
                continue
            for col, partner, matching in ((a, y, m), (b, x, Matching(m.y_to_x, m.x_to_y))):
                if col not in best or best[col][0] < held:
                    best[col] = (held, Entity(partner, matching))
    return {col: e for col, (_, e) in best.items()}


def _blame_determinants(
    facts: list[ColumnFacts], deps: list[Dependency], cal: Calibration, paired: dict[int, Entity], memo: Memo
) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray], dict[int, list[str]]]:
    """Rows whose X value is the likelier mistake: they disagree with their X group on two or more dependents.

    Returns, per blamed column X: the blamed rows (mask), their evidence (one value per blamed row, in row
    order), and the dependents that disagreed.
    """
    by_lhs: dict[int, list[Dependency]] = {}
    for d in deps:
        if not d.more:  # a wrong key is blamed on one column
            by_lhs.setdefault(d.lhs, []).append(d)
    blamed: dict[int, np.ndarray] = {}
    evidence: dict[int, np.ndarray] = {}
    witnesses: dict[int, list[str]] = {}
    for lhs, group in by_lhs.items():
        if len(group) < 2:
            continue
        fx = facts[lhs]
        # Counts of dependents (a few dozen at most): int32 holds them, at half the memory of int64 a row.
        against = np.zeros(fx.column.codes.size, dtype=np.int32)
        judged = np.zeros(fx.column.codes.size, dtype=np.int32)
        strength = np.zeros(fx.column.codes.size)
        measured = []
        for d in group:
            c = _measured(facts, d, deps, cal, memo, paired.get(d.lhs))
            hit = c.deviant & (c.llr >= cal.blame_min_llr)
            against += hit
            judged += c.covered
            strength += np.where(hit, c.llr, 0.0)
            measured.append((d, c, hit))
        rows = (against >= 2) & (2 * against >= judged)
        if rows.any():
            rows &= _belongs_elsewhere(fx, facts, measured, rows)
        if rows.any():
            blamed[lhs] = rows
            # Two independent slips in the dependents are far less likely than one in the key (kept for the
            # blamed rows only, in row order).
            at = np.flatnonzero(rows)
            evidence[lhs] = strength[at] / np.maximum(against[at], 1) + np.log(np.maximum(against[at], 1))
            witnesses[lhs] = [facts[d.rhs].name for d in group]
    return blamed, evidence, witnesses


def _belongs_elsewhere(
    fx: ColumnFacts,
    facts: list[ColumnFacts],
    measured: list[tuple[Dependency, Consensus, np.ndarray]],
    rows: np.ndarray,
) -> np.ndarray:
    """Of the candidate rows, those that look like exactly one other X group's row: that group's consensus
    matches every value the row contradicts (a key pasted onto another record's row). A row many groups would
    fit equally (a single-engine Cessna among Cessna jets fits every maker of small planes) is an unusual
    record, not a wrong key."""
    keep = np.zeros(rows.size, dtype=bool)
    owners: list[dict[int, set[int]]] = []
    for _, c, _ in measured:
        index: dict[int, set[int]] = {}
        if c.group_mode is not None:
            judging = np.flatnonzero(c.group_mode >= 0)
            for x_code, y_code in zip(judging.tolist(), c.group_mode[judging].tolist(), strict=True):
                index.setdefault(int(y_code), set()).add(int(x_code))
        owners.append(index)
    x_codes = fx.column.codes
    for r in np.flatnonzero(rows)[:MAX_ROWS_LISTED].tolist():
        common: set[int] | None = None
        for (d, _, hit), index in zip(measured, owners, strict=True):
            if not hit[r]:
                continue
            fy = facts[d.rhs]
            here = index.get(int(fy.meaning.key_of[fy.column.codes[r]]), set())
            common = set(here) if common is None else common & here
            if not common:
                break
        if common is not None and len(common - {int(x_codes[r])}) == 1:
            keep[r] = True
    return keep


def detect_dependency_violations(
    facts: list[ColumnFacts], n_rows: int, cal: Calibration = DEFAULT
) -> tuple[list[Finding], list[Dependency], dict[int, Judgement]]:
    """The dependencies `discover` finds, the cells that break them, and each dependent's judgement.

    The dependencies returned are the single-column ones (what the other detectors lean on); those on
    several columns together judge their dependents here. Where a pair of columns determines Y, its groups
    are the finer entities: a row they judge is not judged by either column alone.
    """
    deps = discover(facts, n_rows)
    memo: Memo = {}
    paired = entities(facts, deps, cal, memo)
    blamed, blame_llr, witnesses = _blame_determinants(facts, deps, cal, paired, memo)
    by_rhs: dict[int, list[Dependency]] = {}
    for d in sorted(deps, key=lambda d: -len(d.more)):  # composites first: they judge before their parts
        by_rhs.setdefault(d.rhs, []).append(d)

    def entity_of(d: Dependency) -> Entity | None:
        return None if d.more else paired.get(d.lhs)

    # Each measured dependency is four per-row arrays (14 bytes a row): one the judgements below will not
    # ask for again (the pairing's measures of a paired column) is let go now, and each one they ask for is
    # let go once read, so the judging holds the dependencies of one column at a time, not all of them.
    wanted = {_memo_key(d, entity_of(d)) for d in deps if blamed.get(d.rhs) is None}
    for key in [k for k in memo if k not in wanted]:
        del memo[key]

    def judge(
        group: list[Dependency],
    ) -> tuple[Judgement, np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
        """Y's judgement by its determinants; per row whether one of them votes against the cell, their
        combined evidence and the expected value; and the values pasted across groups."""
        pasted: dict[str, int] = {}
        # Per row, 33 bytes for a dependent of one determinant (the usual case), 49-50 for several (before: 45
        # for either, and 16-24 more in np.where's temporaries at once). The sums are
        # added in place where they apply, through one scratch array, instead of np.where's full temporaries
        # (x + 0.0 is x: no sum here is ever -0.0), and what only several determinants need (their weights,
        # the best evidence so far, the finer groups) is made only for them. On 10M rows the judging of the
        # first dependent (beside the measured dependencies it reads) was the detection's peak.
        several = len(group) > 1
        total = np.zeros(n_rows)
        votes = np.zeros(n_rows, dtype=bool)  # a determinant votes against the cell
        expected = np.full(n_rows, -1, dtype=np.int64)
        best = np.full(n_rows, -np.inf) if several else None
        weights = np.zeros(n_rows) if several else None
        weight = 0.0  # the weight of a lone determinant, where it judges
        # Y cells blamed as wrong keys neither count toward Y's groups nor get judged by them.
        excluded = blamed.get(group[0].rhs)
        vouch = np.zeros(n_rows)
        scratch = np.empty(n_rows)
        refined = {c for d in group if d.more for c in d.determinants}
        finer = np.zeros(n_rows, dtype=bool) if refined else None
        judged = np.zeros(0, dtype=bool)
        for d in group:
            c = _measured(facts, d, deps, cal, memo, entity_of(d), excluded)
            memo.pop(_memo_key(d, entity_of(d)), None)
            judged = c.covered
            for x_col in d.determinants:
                if x_col in blamed:
                    # A row whose key is the likelier mistake is not judged by that key's group: its other
                    # values are its own record's, the key is what is wrong.
                    judged = judged & ~blamed[x_col]
            if finer is not None and d.more:
                finer |= judged
            elif finer is not None and d.lhs in refined:
                judged = judged & ~finer
            # A determinant speaks as loudly as its groups keep to one value.
            w = 1.0 - c.rates["split_groups"]
            np.multiply(w, c.llr, out=scratch)
            np.add(total, scratch, out=total, where=judged)
            np.minimum(c.llr, 0.0, out=scratch)
            np.multiply(w, scratch, out=scratch)
            np.add(vouch, scratch, out=vouch, where=judged & ~c.deviant)
            if weights is not None:
                np.add(weights, w, out=weights, where=judged)
            else:
                weight = 0.0 + w
            votes |= judged & c.deviant & (c.llr > 0)
            if best is not None:
                better = judged & c.deviant & (c.llr > best)
                best[better] = c.llr[better]
            else:
                better = judged & c.deviant & (c.llr > -np.inf)
            expected[better] = c.expected[better]
            if c.pasted is not None and (judged & c.pasted.rows).any():
                fy = facts[d.rhs]
                text = fy.column.uniques[int(fy.meaning.spelling[c.pasted.value])]
                pasted[text] = max(pasted.get(text, 0), c.pasted.groups)
        # Each determinant that judges the cell votes with its evidence; the cell takes their weighted mean.
        del scratch, best
        if weights is not None:
            unjudged = ~(weights > 0)
            np.maximum(weights, 1e-9, out=weights)
            llr = np.divide(total, weights, out=total)
        else:  # a lone determinant: its weight where it judged, 0 elsewhere
            unjudged = ~judged if weight > 0 else np.ones(n_rows, dtype=bool)
            llr = np.divide(total, max(weight, 1e-9) if weight > 0 else 1.0, out=total)
        llr[unjudged] = 0.0
        return Judgement(vouch), votes, llr, expected, pasted

    findings: list[Finding] = []
    judgements: dict[int, Judgement] = {}
    for rhs, group in by_rhs.items():  # one column at a time: only its vouch is kept past its findings
        judgement, votes, llr, expected, pasted = judge(group)
        judgements[rhs] = judgement
        if rhs in blamed:
            llr = np.where(blamed[rhs], 0.0, llr)
        rows = np.flatnonzero(votes & (llr > 0) & (expected >= 0))
        if rows.size:
            found = _violation_finding(facts[rhs], group, facts, rows, llr[rows], expected[rows], pasted)
            findings.append(found)
    for lhs, mask in blamed.items():
        rows = np.flatnonzero(mask)
        findings.append(_blame_finding(facts[lhs], rows, blame_llr[lhs], witnesses[lhs]))
    return findings, [d for d in deps if not d.more], judgements


def _violation_finding(
    fy: ColumnFacts,
    group: list[Dependency],
    facts: list[ColumnFacts],
    rows: np.ndarray,
    llr: np.ndarray,
    expected: np.ndarray,
    pasted: dict[str, int] | None = None,
) -> Finding:
    # A determinant is a column's name, or the list of the columns read together.
    names: list[str | list[str]] = [
        [facts[c].name for c in d.determinants] if d.more else facts[d.lhs].name
        for d in sorted(group, key=lambda d: (-len(d.more), -d.confidence))
    ]
    uniq = fy.column.uniques
    exp_values = [uniq[int(e)] for e in expected]
    # A column read with another says so; alone, where the pair judges its rows, it is not named again.
    within = {c for n in names if not isinstance(n, str) for c in n}
    words = [
        " and ".join(n) + " together" if isinstance(n, list) else n
        for n in names
        if isinstance(n, list) or n not in within
    ]
    shown = ", ".join(words[:3]) + (" and others" if len(words) > 3 else "")
    name = fy.name

    def describe(f: Finding) -> str:
        examples = "; ".join(
            f"row {int(r)}: '{fy.column.value(int(r))}' where its group has '{e}'"
            for r, e in zip(f.rows[:3], (f.expected or [])[:3], strict=False)
        )
        told = "".join(
            f" '{v}' is the odd value in {k:,} groups whose own value is another: pasted across entities, not a "
            "second value of each."
            for v, k in sorted((pasted or {}).items())[:3]
        )
        return (
            f"'{name}' is determined by {shown}: rows that share those values describe one entity and agree "
            f"on it. {f.n_rows:,} rows carry a different value than the rest of their entity: {examples}.{told}"
        )

    return Finding(
        type="dependency_violation",
        columns=[name],
        rows=rows,
        cols=np.full(rows.size, fy.index, dtype=np.int64),
        title=f"Conflicting values of {name} for the same entity",
        description="",
        describe=describe,
        suggested_action="Check these rows against the source; where the entity's value is right, replace the "
        "odd value with it.",
        category="smart_fixes",
        detector="dependencies",
        stats={
            "rhs": name,
            "determinants": names,
            "rule": "consensus",
            "min_group": MIN_GROUP,
            "missing_markers": missing_markers(fy.null_marker),
            "rows": rows[:MAX_ROWS_LISTED].tolist(),
            **({"pasted": dict(pasted)} if pasted else {}),
        },
        expected=exp_values,
        key=f"fd:{name}",
        llr=llr,
        stat=llr,
        stat_name="evidence against the cell from its entity's consensus (log-likelihood ratio)",
        value_level=False,
    )


def _blame_finding(fx: ColumnFacts, rows: np.ndarray, llr: np.ndarray, witnesses: list[str]) -> Finding:
    name = fx.name
    shown = ", ".join(witnesses[:4]) + (" and others" if len(witnesses) > 4 else "")

    def describe(f: Finding) -> str:
        return (
            f"{f.n_rows:,} rows carry a value of '{name}' that the rest of their record contradicts: on two or "
            f"more of {shown} they disagree with every other row holding that '{name}'. One wrong '{name}' "
            f"explains this better than several wrong values (e.g. row {int(f.rows[0])}: "
            f"'{fx.column.value(int(f.rows[0]))}')."
        )

    return Finding(
        type="dependency_violation",
        columns=[name],
        rows=rows,
        cols=np.full(rows.size, fx.index, dtype=np.int64),
        title=f"Values of {name} that do not match the rest of their record",
        description="",
        describe=describe,
        suggested_action=f"Check '{name}' in these rows against the source: the row probably belongs to "
        "another record, or its key was mistyped.",
        category="smart_fixes",
        detector="dependencies",
        stats={
            "lhs": name,
            "dependents": witnesses,
            "rule": "determinant",
            "min_group": MIN_GROUP,
            "missing_markers": missing_markers(fx.null_marker),
            "rows": rows[:MAX_ROWS_LISTED].tolist(),
        },
        key=f"fd-key:{name}",
        llr=llr,
        stat=llr,
        stat_name="evidence against the key from the dependents it contradicts (log-likelihood ratio)",
        value_level=False,
    )
