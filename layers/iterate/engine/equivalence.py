"""The engine path against the single pass on one file: the same flags per issue, or what the engine loses."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from iterate.settings import Settings

Cell = tuple[int, str]


@dataclass
class IssueDiff:
    """One issue's flagged cells on both paths."""

    issue_id: str
    issue_type: str
    single: int
    engine: int
    common: int

    @property
    def exact(self) -> bool:
        return self.single == self.engine == self.common


@dataclass
class Equivalence:
    """Per issue, the flagged cells of both paths; `same_detection`: the engine's sample read the file into the
    same table as the single pass (every row, same text), so the decision was the same."""

    name: str
    rows: int
    sample_rows: int
    same_detection: bool
    single_flags: list[tuple[int, str, str]] = field(default_factory=list)
    engine_flags: list[tuple[int, str, str]] = field(default_factory=list)
    issues: list[IssueDiff] = field(default_factory=list)

    @property
    def single(self) -> int:
        return sum(d.single for d in self.issues)

    @property
    def engine(self) -> int:
        return sum(d.engine for d in self.issues)

    @property
    def common(self) -> int:
        return sum(d.common for d in self.issues)


def _cells(rows: list[int], columns: list[str], ids: list[str]) -> dict[str, set[Cell]]:
    out: dict[str, set[Cell]] = defaultdict(set)
    for r, c, i in zip(rows, columns, ids, strict=True):
        out[i].add((int(r), str(c)))
    return out


def compare(path: Path, settings: Settings | None = None) -> Equivalence:
    """Both paths over `path`, in-process: read_table → detect → flags_of against run_engine's flags."""
    from iterate.detect import detect
    from iterate.engine.step import run_engine
    from iterate.io import read_table
    from iterate.issues import flags_of, issue_id

    settings = settings or Settings.from_env()
    table = read_table(path, name=path.parent.name)
    detection = detect(table)
    single = flags_of(detection.findings, table)
    types = {issue_id(f): f.type for f in detection.findings}
    result = run_engine(path, settings, name=path.parent.name)
    engine = result.flags.to_pydict()
    a = _cells(single.rows.tolist(), list(single.columns), list(single.issue_ids))
    b = _cells(engine["row"], engine["column"], engine["issue_id"])
    by_id = {i.id: i.type for i in result.candidates}
    same = result.counts.sampleRows == table.n_rows and sorted(
        (f.key, f.n_cells) for f in result.detection.findings
    ) == sorted((f.key, f.n_cells) for f in detection.findings)
    diffs = [
        IssueDiff(
            i,
            by_id.get(i) or types.get(i, "?"),
            len(a.get(i, ())),
            len(b.get(i, ())),
            len(a.get(i, set()) & b.get(i, set())),
        )
        for i in sorted(set(a) | set(b))
    ]
    return Equivalence(
        path.parent.name,
        table.n_rows,
        result.counts.sampleRows,
        same,
        [(r, c, i) for i, cells in a.items() for r, c in cells],
        [(r, c, i) for i, cells in b.items() for r, c in cells],
        diffs,
    )


def by_type(results: list[Equivalence]) -> dict[str, tuple[int, int, int]]:
    """Per issue type over every file: cells flagged by the single pass, by the engine, by both."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in results:
        for d in r.issues:
            t = out[d.issue_type]
            t[0] += d.single
            t[1] += d.engine
            t[2] += d.common
    return {k: (v[0], v[1], v[2]) for k, v in sorted(out.items())}
