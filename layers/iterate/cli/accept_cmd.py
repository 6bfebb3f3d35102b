"""`iterate accept OUT_DIR ISSUE_ID --reason TEXT [--file PATH]`: record an issue as known and accepted."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from iterate.issueref import resolve
from iterate.visible import visible


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "accept",
        help="accept an issue of a run: it is still reported, marked accepted, and never fails --fail-on",
        description=(
            "Records ISSUE_ID of the run in OUT_DIR as accepted, with the reason, who and when, in "
            ".iterate/accepted.json: the nearest one in the analysed file's directory or above it (keep one in "
            "your repository's root for all its data), else a new one beside the file; --file names another. "
            "Later runs match it by the issue's type, columns and the values it flags (kept as hashes, never "
            "the values), not by run: the same values in more rows still match (marked 'grew since "
            "accepted'), a value not seen when accepting does not. Re-accepting an issue replaces its entry."
        ),
    )
    p.add_argument("out_dir", metavar="OUT_DIR", type=Path, help="a directory written by iterate analyze")
    p.add_argument(
        "issue_id",
        metavar="ISSUE_ID",
        help="the issue's id (analysis.json) or its handle (the summary's first column)",
    )
    p.add_argument(
        "--reason", required=True, metavar="TEXT", help="why the issue is accepted (shown beside it)"
    )
    p.add_argument(
        "--file", metavar="PATH", type=Path, help="the accepted-issues file to write (default: see above)"
    )
    p.add_argument("--by", metavar="NAME", help="who accepts it (default: your login name)")
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(visible(f"iterate accept: {message}"), file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """0 when recorded; 2 when the run, the issue or the accepted file is not usable."""
    from iterate.accepted import (
        AcceptError,
        accept,
        accepted_path_for,
        issue_values,
        load_accepted,
        save_accepted,
    )
    from iterate.cli.rundir import source_dir
    from iterate.contracts import AnalysisResult
    from iterate.storage.local import LocalArtifactStore

    out: Path = args.out_dir
    analysis = out / "analysis.json"
    if not analysis.is_file():
        return _fail(f"{analysis} not found: run `iterate analyze FILE --out {out}` first")
    try:
        result = AnalysisResult.model_validate_json(analysis.read_text(encoding="utf-8"))
    except (ValidationError, ValueError) as exc:
        return _fail(
            f"{analysis}: not a run's analysis ({str(exc).splitlines()[0]}) — re-run iterate analyze"
        )
    wanted = resolve(args.issue_id, (i.id for i in result.issues))
    issue = next((i for i in result.issues if i.id == wanted), None)
    if issue is None:
        ids = ", ".join(i.id for i in result.issues[:8]) + (", …" if len(result.issues) > 8 else "")
        return _fail(f"{args.issue_id}: no such issue in {out} — its issues are: {ids or 'none'}")
    if args.file is not None:
        path = args.file
    else:
        where = source_dir(out)
        if where is None:
            return _fail(f"{out} does not say where its input file is (read from stdin?) — give --file PATH")
        path = accepted_path_for(where)
    try:
        store = LocalArtifactStore(out)
        values = issue_values(store, [issue.id])[issue.id]
        by = args.by or getpass.getuser()
        acceptance = accept(issue, values, reason=args.reason, by=by)
        current = load_accepted(path)
        kept = [a for a in current.accepted if (a.type, a.columns) != (acceptance.type, acceptance.columns)]
        save_accepted(path, current.model_copy(update={"accepted": [*kept, acceptance]}))
    except AcceptError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"{path}: cannot be written ({exc.strerror or exc}) — give another --file")
    replaced = " (replacing its earlier acceptance)" if len(kept) < len(current.accepted) else ""
    print(
        visible(
            f"accepted {issue.id} ({issue.type} in {', '.join(issue.affectedColumns)}, "
            f"{len(values):,} distinct value{'s' if len(values) != 1 else ''}) in {path}{replaced}; "
            "the next iterate analyze marks it and --fail-on lets it pass"
        ),
        file=sys.stderr,
    )
    return 0
