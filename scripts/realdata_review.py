"""Run detection on the staged real-data corpus and print every issue for review: `make realdata`.

The corpus (scripts/stage_realdata.py) holds public tables nobody injected errors into; each issue Iterate
raises on them is judged in tests/realdata/verdicts.toml as `real`, `defensible` or `false_alarm`, and each
column is either `correct` (a flagged cell there is a false alarm) or listed under `problems` with the reason.
This script prints, per table, every issue with its verdict (or UNREVIEWED), then a summary;
`--stubs` prints TOML for the issues that have no verdict yet, ready to paste and fill in.
tests/realdata/test_realdata.py runs the same checks in `make test`.

Detection runs in-process through the engine's public entry points, chained as the profile step chains
them (read_table → detect → profile_table → issues_from_findings → flags_of): no sandbox, no agents.
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VERDICTS = REPO / "tests" / "realdata" / "verdicts.toml"
STAGED = REPO / "out" / "realdata"
# The second corpus (issue 32): ../shared/realtables, read in place, reviewed in verdicts_shared.toml.
VERDICTS_SHARED = REPO / "tests" / "realdata" / "verdicts_shared.toml"
SHARED = REPO.parent / "shared" / "realtables"
KINDS = ("real", "defensible", "false_alarm")
EXAMPLES = 6


@dataclass
class TableRun:
    """What detection said about one table: its issues and, per issue, the flagged cells by column."""

    name: str
    columns: list[str]
    n_rows: int
    issues: list[Any]  # iterate.contracts.Issue
    flags: dict[str, Counter[str]]  # issue id → column → flagged cells
    flagged_rows: dict[tuple[str, str], list[int]]  # (issue id, column) → flagged rows, in flag order
    values: Any  # the Table, to show flagged values
    seconds: float


def use_fitted(path: Path) -> None:
    """Run detection with another fitted decision (a cross-fit that left these tables out)."""
    import importlib

    # The modules themselves: the package re-exports a function named `decide` over its module's name.
    decide = importlib.import_module("iterate.detect.decide")
    model = importlib.import_module("iterate.detect.model")
    fitted = model.load(path)
    decide.load_model = lambda: fitted


def analyse(path: Path, name: str | None = None) -> TableRun:
    """Detection on one staged file, through the engine entry points the profile step uses."""
    from iterate.detect import detect
    from iterate.io import read_table
    from iterate.issues import flags_of, issues_from_findings
    from iterate.profile import profile_table

    started = time.perf_counter()
    table = read_table(path, name=name or path.stem)
    detection = detect(table)
    profile = profile_table(table, null_marker=detection.null_marker)
    # issues_from_findings first: it renames clashing ids on the findings, and flags_of reads them.
    issues = issues_from_findings(detection.findings, table, profile)
    flags = flags_of(detection.findings, table)
    by_issue: dict[str, Counter[str]] = {}
    rows: dict[tuple[str, str], list[int]] = {}
    for row, column, issue_id in zip(flags.rows, flags.columns, flags.issue_ids, strict=True):
        by_issue.setdefault(str(issue_id), Counter())[str(column)] += 1
        rows.setdefault((str(issue_id), str(column)), []).append(int(row))
    return TableRun(
        name=name or path.stem,
        columns=list(table.column_names),
        n_rows=table.n_rows,
        issues=issues,
        flags=by_issue,
        flagged_rows=rows,
        values=table,
        seconds=time.perf_counter() - started,
    )


def load_verdicts(path: Path = VERDICTS) -> dict[str, Any]:
    with path.open("rb") as f:
        return tomllib.load(f)


@dataclass
class Judgement:
    """How one table's run compares with its verdicts; `failures` are what the test fails on."""

    failures: list[str] = field(default_factory=list)
    known_false_flags: list[str] = field(default_factory=list)  # reviewed debt: within an issue's false_flags
    unreviewed: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    false_flags: dict[str, int] = field(default_factory=dict)  # issue id → flagged cells known to be right


def _problem(spec: Any) -> tuple[str, set[int] | None, set[str] | None]:
    """A `problems` entry: a reason, or a table {why, rows?, values?} naming the cells that are wrong."""
    if isinstance(spec, str):
        return spec, None, None
    rows = set(spec["rows"]) if "rows" in spec else None
    values = set(spec["values"]) if "values" in spec else None
    return str(spec.get("why", "")), rows, values


def correct_columns(entry: dict[str, Any], columns: list[str]) -> set[str]:
    """The columns a table's verdicts call correct; `correct = "all"` means every column not under problems."""
    correct = entry.get("correct", [])
    if correct == "all":
        return set(columns) - set(entry.get("problems", {}))
    return set(correct)


def count_false_flags(run: TableRun, entry: dict[str, Any]) -> dict[str, Counter[str]]:
    """Per issue, per column: flagged cells the verdicts say are right.

    Every flagged cell of a `correct` column; in a `problems` column that names its wrong cells (`rows`
    and/or `values`), every flagged cell outside them. A problem column without either is not counted:
    its reviewer could not say which cells are wrong.
    """
    correct = correct_columns(entry, run.columns)
    problems = {c: _problem(v) for c, v in entry.get("problems", {}).items()}
    out: dict[str, Counter[str]] = {}
    for (issue_id, column), rows in run.flagged_rows.items():
        if column in correct:
            n = len(rows)
        elif column in problems and (problems[column][1] is not None or problems[column][2] is not None):
            _, bad_rows, bad_values = problems[column]
            col = run.values.column(column)
            n = sum(
                1
                for r in rows
                if not (
                    (bad_rows is not None and r in bad_rows)
                    or (bad_values is not None and col.value(r) in bad_values)
                )
            )
        else:
            continue
        if n:
            out.setdefault(issue_id, Counter())[column] += n
    return out


def judge(run: TableRun, verdicts: dict[str, Any]) -> Judgement:
    """Compare one table's run with its entry in the verdicts file."""
    j = Judgement()
    entry = verdicts.get("tables", {}).get(run.name)
    if entry is None:
        j.failures.append(f"{run.name}: no [tables.{run.name}] entry in the verdicts file")
        j.unreviewed = [i.id for i in run.issues]
        return j
    correct = correct_columns(entry, run.columns)
    problems = dict(entry.get("problems", {}))
    judged = dict(entry.get("issues", {}))
    both = sorted(correct & set(problems))
    if both:
        j.failures.append(f"{run.name}: columns both correct and with problems: {both}")
    unknown = sorted((correct | set(problems)) - set(run.columns))
    if unknown:
        j.failures.append(f"{run.name}: the verdicts name columns the table does not have: {unknown}")
    unclassified = [c for c in run.columns if c not in correct and c not in problems]
    if unclassified:
        j.failures.append(
            f"{run.name}: columns neither `correct` nor under `problems`: {unclassified} (read them, classify them)"
        )
    for issue_id, v in judged.items():
        if not isinstance(v, dict) or v.get("verdict") not in KINDS or not v.get("why"):
            j.failures.append(
                f"{run.name}: verdict for {issue_id!r} needs verdict = one of {KINDS} and a `why`"
            )
    raised = {i.id for i in run.issues}
    j.unreviewed = sorted(raised - set(judged))
    j.stale = sorted(set(judged) - raised)
    for issue_id in j.unreviewed:
        j.failures.append(f"{run.name}: issue {issue_id!r} has no verdict (unreviewed)")
    for issue_id in j.stale:
        j.failures.append(
            f"{run.name}: verdict for {issue_id!r} but the issue is no longer raised: delete it "
            "(the false-alarm share counts the verdicts)"
        )
    for issue_id, by_column in sorted(count_false_flags(run, entry).items()):
        n = sum(by_column.values())
        j.false_flags[issue_id] = n
        where = ", ".join(f"{c!r}: {k}" for c, k in sorted(by_column.items()))
        v = judged.get(issue_id)
        if not isinstance(v, dict):
            j.failures.append(
                f"{run.name}: {issue_id!r} (unreviewed) flags {n} cells the verdicts call right ({where})"
            )
            continue
        allowed = int(v.get("false_flags", 0))
        if n > allowed:
            j.failures.append(
                f"{run.name}: {issue_id!r} flags {n} cells the verdicts call right ({where}); "
                f"its review allowed {allowed}"
            )
        else:
            j.known_false_flags.append(
                f"{run.name}: {issue_id!r} ({v['verdict']}) flags {n} right cells ({where})"
            )
    return j


def share(verdicts: dict[str, Any]) -> tuple[Counter[str], float]:
    """Verdict counts over the whole corpus and the false-alarm share of issues."""
    counts: Counter[str] = Counter()
    for entry in verdicts.get("tables", {}).values():
        for v in entry.get("issues", {}).values():
            counts[v.get("verdict", "?") if isinstance(v, dict) else "?"] += 1
    total = sum(counts.values())
    return counts, (counts["false_alarm"] / total if total else 0.0)


def _clip(text: str, n: int = 70) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def print_table(run: TableRun, verdicts: dict[str, Any], judgement: Judgement, out: Any = sys.stdout) -> None:
    entry = verdicts.get("tables", {}).get(run.name, {})
    judged = entry.get("issues", {})
    flagged = sum(sum(c.values()) for c in run.flags.values())
    print(
        f"\n=== {run.name}: {run.n_rows:,} rows × {len(run.columns)} columns, {len(run.issues)} issues, "
        f"{flagged:,} flagged cells ({run.seconds:.2f} s)",
        file=out,
    )
    for issue in run.issues:
        v = judged.get(issue.id)
        tag = f"{v['verdict'].upper()}: {v.get('why', '')}" if isinstance(v, dict) else "UNREVIEWED"
        ev = issue.evidence
        cells = ev.affectedCells if ev else 0
        per_col = run.flags.get(issue.id, Counter())
        print(f"\n  [{issue.id}] {issue.type} ({issue.severity}, {issue.detector})", file=out)
        print(f"    verdict: {tag}", file=out)
        n_false = judgement.false_flags.get(issue.id, 0)
        if n_false or (isinstance(v, dict) and v.get("false_flags")):
            allowed = v.get("false_flags", 0) if isinstance(v, dict) else 0
            print(
                f"    flagged cells the verdicts call right: {n_false} (review allowed {allowed})", file=out
            )
        print(
            f"    columns: {issue.affectedColumns}; rows {issue.affectedRows}, cells {cells}; "
            f"flagged: {dict(per_col) if per_col else 'none'}",
            file=out,
        )
        print(f"    {_clip(issue.description, 300)}", file=out)
        # The flagged values, most frequent first: what a reviewer needs to see to judge the claim.
        for column in per_col:
            rows = run.flagged_rows[(issue.id, column)]
            col = run.values.column(column)
            values = Counter(col.value(r) for r in rows)
            first_row = {}
            for r in rows:
                first_row.setdefault(col.value(r), r)
            shown = ", ".join(
                f"{_clip(repr(val), 40)}×{n} (row {first_row[val]})"
                for val, n in values.most_common(EXAMPLES)
            )
            more = f" … {len(values) - EXAMPLES} more values" if len(values) > EXAMPLES else ""
            print(f"    flagged {column}: {shown}{more}", file=out)
        if not per_col and ev:
            for ex in ev.examples[:EXAMPLES]:
                expected = f" (expected {ex.expected!r})" if ex.expected is not None else ""
                print(f"    e.g. row {ex.row} {ex.column} = {_clip(repr(ex.value), 60)}{expected}", file=out)


def stubs(run: TableRun, judgement: Judgement) -> str:
    """TOML for the issues of `run` that have no verdict yet."""
    by_id = {i.id: i for i in run.issues}
    lines = [f"# {run.name}: paste under [tables.{run.name}.issues] and judge each"]
    for issue_id in judgement.unreviewed:
        i = by_id[issue_id]
        n = judgement.false_flags.get(issue_id, 0)
        extra = f", false_flags = {n}" if n else ""
        lines.append(
            f'"{issue_id}" = {{ verdict = "?", why = ""{extra} }}  # {i.type} in {", ".join(i.affectedColumns)[:60]}'
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="tables to review (default: every staged table)")
    parser.add_argument("--staged", type=Path, help=f"default: {STAGED} ({SHARED} with --shared)")
    parser.add_argument(
        "--verdicts", type=Path, help=f"default: {VERDICTS} ({VERDICTS_SHARED.name} with --shared)"
    )
    parser.add_argument("--stubs", action="store_true", help="print TOML stubs for unreviewed issues")
    parser.add_argument(
        "--shared", action="store_true", help=f"the tables of {SHARED} and {VERDICTS_SHARED.name} instead"
    )
    parser.add_argument(
        "--fitted", type=Path, help="judge detection with this fitted decision (default: the engine's own)"
    )
    args = parser.parse_args(argv)
    if args.fitted is not None:
        use_fitted(args.fitted)
    # An explicit --staged/--verdicts wins over --shared's defaults (a candidate verdicts file can be checked).
    args.staged = args.staged or (SHARED if args.shared else STAGED)
    args.verdicts = args.verdicts or (VERDICTS_SHARED if args.shared else VERDICTS)
    files = sorted(args.staged.glob("*.csv"))
    if args.names:
        files = [f for f in files if f.stem in set(args.names)]
    if not files:
        print(
            f"realdata_review: no staged tables in {args.staged}: run `make realdata-stage`", file=sys.stderr
        )
        return 1
    verdicts = load_verdicts(args.verdicts) if args.verdicts.exists() else {}
    runs = [analyse(f) for f in files]
    judgements = [judge(r, verdicts) for r in runs]
    for run, j in zip(runs, judgements, strict=True):
        print_table(run, verdicts, j)
    print("\n=== summary")
    print(
        f"{'table':<16}{'rows':>7}{'cols':>5}{'issues':>7}{'real':>6}{'def.':>6}{'false':>6}{'unrev.':>7}"
        f"{'flagged':>9}{'right':>7}"
    )
    totals: Counter[str] = Counter()
    shares = []
    for run, j in zip(runs, judgements, strict=True):
        judged = verdicts.get("tables", {}).get(run.name, {}).get("issues", {})
        kinds = Counter(judged[i.id]["verdict"] for i in run.issues if isinstance(judged.get(i.id), dict))
        flagged = sum(sum(c.values()) for c in run.flags.values())
        row = Counter(
            issues=len(run.issues),
            unreviewed=len(j.unreviewed),
            flags=flagged,
            right=sum(j.false_flags.values()),
            **kinds,
        )
        totals.update(row)
        if run.issues:
            shares.append(row["false_alarm"] / len(run.issues))
        print(
            f"{run.name:<16}{run.n_rows:>7}{len(run.columns):>5}{row['issues']:>7}{row['real']:>6}"
            f"{row['defensible']:>6}{row['false_alarm']:>6}{row['unreviewed']:>7}{row['flags']:>9}{row['right']:>7}"
        )
    print(
        f"{'all ' + str(len(runs)) + ' tables':<28}{totals['issues']:>7}{totals['real']:>6}"
        f"{totals['defensible']:>6}{totals['false_alarm']:>6}{totals['unreviewed']:>7}{totals['flags']:>9}"
        f"{totals['right']:>7}"
    )
    print("(flagged: cells in flags.csv; right: flagged cells that the verdicts call right)")
    reviewed = totals["real"] + totals["defensible"] + totals["false_alarm"]
    fa_share = totals["false_alarm"] / reviewed if reviewed else 0.0
    target = verdicts.get("corpus", {}).get("target_false_alarm_share", 0.10)
    print(
        f"false-alarm share of reviewed issues: {totals['false_alarm']}/{reviewed} = {fa_share:.1%} "
        f"(target ≤ {target:.0%}); mean of the per-table shares {sum(shares) / max(len(shares), 1):.1%}; "
        f"unreviewed issues: {totals['unreviewed']}"
    )
    known = [k for j in judgements for k in j.known_false_flags]
    failures = [f for j in judgements for f in j.failures]
    if known:
        print(f"\nknown debt: reviewed issues that flag cells the verdicts call right ({len(known)}):")
        for k in known:
            print(f"  {k}")
    if failures:
        print(f"\nwhat tests/realdata would fail on ({len(failures)}):")
        for f in failures:
            print(f"  {f}")
    if args.stubs:
        for run, j in zip(runs, judgements, strict=True):
            if j.unreviewed:
                print("\n" + stubs(run, j))
    return 0


if __name__ == "__main__":
    sys.exit(main())
