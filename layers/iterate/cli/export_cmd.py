"""`iterate export RUN_DIR --format gx|soda|dqdl [--out FILE]`: a run's rules for other data-quality tools."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from iterate.export import FORMATS, export_run
from iterate.visible import visible


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "export",
        help="turn a run's profile and confirmed issues into Great Expectations, Soda or Glue DQDL rules",
        description=(
            "Writes the rules of the run in RUN_DIR (a directory written by `iterate analyze --out`) for another "
            "tool: column types and completeness, allowed values, ranges, formats, keys and dependencies from the "
            "profile, and one check per confirmed issue, built from the parameters the issue was proven with. "
            "Checks that encode issues are failures; what the profile only observed (ranges widened by a margin, "
            "vocabularies, shapes, keys, dependencies) are warnings, so next month's new product or larger price "
            "does not fail a gate. On the analysed file exactly the failures that encode issues fail; on a "
            "corrected file every failure passes. "
            "gx: a Great Expectations 1.x suite (JSON); soda: SodaCL checks (YAML, DuckDB SQL conditions); "
            "dqdl: an AWS Glue Data Quality ruleset. Confirmed issues no rule can express are listed on stderr."
        ),
    )
    p.add_argument("run_dir", metavar="RUN_DIR", type=Path)
    p.add_argument(
        "--format", required=True, choices=FORMATS, dest="fmt", help="the target tool: gx, soda or dqdl"
    )
    p.add_argument(
        "--out", metavar="FILE", type=Path, help="write the rules to FILE instead of standard output"
    )
    p.add_argument(
        "--table", metavar="NAME", help="soda: the table the checks are for (default: the dataset's name)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    run_dir: Path = args.run_dir
    missing = [n for n in ("profile.json", "analysis.json") if not (run_dir / n).is_file()]
    if missing:
        print(
            visible(
                f"iterate export: {run_dir / missing[0]} not found: run `iterate analyze FILE --out {run_dir}` first"
            ),
            file=sys.stderr,
        )
        return 2
    try:
        rendered = export_run(run_dir, args.fmt, table=args.table)
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(visible(f"iterate export: {run_dir} holds a damaged run: {first}"), file=sys.stderr)
        return 2
    if args.out is None:
        sys.stdout.write(rendered.text)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(rendered.text, encoding="utf-8")
        encoding = sum(1 for c in rendered.checks if c.issues)
        warnings = sum(1 for c in rendered.checks if c.level == "warn")
        print(
            visible(
                f"{args.out}: {len(rendered.checks)} checks, {encoding} of them encode confirmed issues, "
                f"{warnings} are warnings"
            ),
            file=sys.stderr,
        )
    for issue, why in rendered.skipped.items():
        print(visible(f"not exported: {issue}: {why}"), file=sys.stderr)
    return 0
