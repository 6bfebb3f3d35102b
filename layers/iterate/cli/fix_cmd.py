"""`iterate fix RUN_DIR [ISSUE_ID ...] [--quick] [--dry-run] [--confirm drop|clear] [--yes]`: fixes as a new version."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from iterate.visible import visible

# A destructive fix asked for without its confirmation: the impact is printed and nothing is written.
EXIT_UNCONFIRMED = 4
_PREVIEW = 10


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "fix",
        help="apply chosen fixes to the analysed file and write a new version of it (never the original)",
        description=(
            "Applies fixes to the input of the run in RUN_DIR (a directory written by `iterate analyze --out`) and "
            "writes RUN_DIR/versions/vN/: the fixed file in the input's format (CSV keeps its delimiter, quoting "
            "and encoding; Parquet and JSON Lines keep their types; .xlsx is written as UTF-8 CSV), changes.csv "
            "(row,column,old,new,issue_id,action; row = 0-based data row of the input) and version.json (the "
            "parent's sha256, the issues applied, the answers used, counts). Each issue's action is the one its "
            "follow-up ended with (`iterate followup`); a quick fix without one gets the follow-up's first "
            "choice. Only the cells the run flagged for an issue are touched. Exit codes: 0 written (or "
            "--dry-run), 2 bad input, 4 a destructive fix not confirmed."
        ),
    )
    p.add_argument("run_dir", metavar="RUN_DIR", type=Path)
    p.add_argument(
        "issue_ids",
        metavar="ISSUE_ID",
        nargs="*",
        help="issues to fix (default: every issue whose follow-up has ended)",
    )
    p.add_argument("--quick", action="store_true", help="also apply every quick fix")
    p.add_argument(
        "--dry-run", action="store_true", help="print what would change (counts and a preview); write nothing"
    )
    p.add_argument(
        "--confirm",
        action="append",
        choices=("drop", "clear"),
        default=[],
        help="allow a destructive fix: drop (rows or columns), clear (values set to empty); repeatable",
    )
    p.add_argument("--yes", action="store_true", help="confirm every destructive fix (drop and clear)")
    p.set_defaults(func=run)


def _cell(text: str | None) -> str:
    return "(empty)" if text is None else "'" + visible(text[:60]) + "'"


def impact_lines(prepared: Any) -> list[str]:
    """Counts per issue and action, then a preview of the first changes."""
    from iterate.fix import DESTRUCTIVE

    result = prepared.result
    lines = []
    for c in prepared.chosen:
        name = c.action.action
        n = result.counts.get(c.issue.id, {}).get(name, 0)
        unit = {"drop_rows": "rows", "drop_column": "column", "flag_for_review": "cells to review"}.get(
            name, "cells"
        )
        mark = " [destructive]" if name in DESTRUCTIVE else ""
        lines.append(f"  {visible(c.issue.id)}: {visible(name)} {n:,} {unit} ({c.by}){mark}")
        for why, k in result.skipped.get(c.issue.id, {}).items():
            lines.append(f"      {k:,} left as they were: {visible(why)}")
    shown = [ch for ch in result.changes if ch.action != "flag_for_review"][:_PREVIEW]
    if shown:
        lines.append("preview:")
    for ch in shown:
        where = "column" if ch.row is None else f"row {ch.row}"
        if ch.action == "drop_rows":
            lines.append(f"  {where}: removed ({visible(ch.issue_id)})")
        elif ch.action == "drop_column":
            lines.append(f"  column {visible(ch.column)}: removed ({visible(ch.issue_id)})")
        else:
            lines.append(f"  {where} {visible(ch.column)}: {_cell(ch.old)} -> {_cell(ch.new)}")
    return lines


def run(args: argparse.Namespace) -> int:
    from iterate.fix import FixError, needs_confirmation, prepare, write

    run_dir: Path = args.run_dir
    try:
        prepared = prepare(run_dir, list(args.issue_ids), quick=args.quick)
    except FixError as exc:
        print(f"iterate fix: {visible(exc)}", file=sys.stderr)
        return 2
    for note in prepared.notes:
        print(f"iterate fix: not applied: {visible(note)}", file=sys.stderr)
    result = prepared.result
    changed = sum(
        1 for ch in result.changes if ch.row is not None and ch.action not in ("drop_rows", "flag_for_review")
    )
    print(
        f"{len(prepared.chosen)} issue{'s' if len(prepared.chosen) != 1 else ''}: {changed:,} cells changed, "
        f"{len(result.dropped_rows):,} rows and {len(result.dropped_columns)} columns removed"
    )
    print("\n".join(impact_lines(prepared)))
    confirmed = {"drop", "clear"} if args.yes else set(args.confirm)
    unconfirmed = needs_confirmation(result, prepared.steps, confirmed)
    if args.dry_run:
        print("dry run: nothing written")
        return 0
    if unconfirmed:
        kinds = sorted(
            {{"drop_rows": "drop", "drop_column": "drop"}.get(s.action.action, "clear") for s in unconfirmed}
        )
        ids = Counter(s.issue_id for s in unconfirmed)
        print(
            f"iterate fix: {', '.join(visible(i) for i in ids)} would remove data (see above); nothing written — "
            f"confirm with {' '.join('--confirm ' + k for k in kinds)} (or --yes), or choose another fix with "
            "`iterate followup`",
            file=sys.stderr,
        )
        return EXIT_UNCONFIRMED
    try:
        target = write(run_dir, prepared)
    except (FixError, OSError) as exc:
        print(f"iterate fix: {visible(exc)}", file=sys.stderr)
        return 2
    print(f"version:  {visible(target)}")
    print(f"changes:  {visible(target.parent / 'changes.csv')}")
    print(f"re-check: iterate analyze {visible(target)} --out {visible(run_dir)}")
    return 0
