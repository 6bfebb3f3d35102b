"""`iterate delete OUT_DIR`: remove a local run directory Iterate wrote, and the input's stored proofs."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from iterate.visible import visible

# Written into a run directory besides a run's own files: `iterate fix`'s versions (a rerun keeps them).
FIX_VERSIONS = "versions"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "delete",
        help="delete a run directory written by iterate analyze, and the stored proofs of its input",
        description=(
            "Deletes what Iterate wrote for the run in OUT_DIR: the report, analysis, flags, profile, scripts, "
            "investigations, follow-up conversations, the copy of data read from stdin, the versions `iterate "
            "fix` wrote, and the input's stored proofs in the script library (ITERATE_SCRIPT_LIBRARY, default "
            "~/.cache/iterate/scripts). OUT_DIR itself goes when nothing else is in it; files that are not "
            "Iterate's are kept and listed. A directory that holds no run is refused. The input file is never "
            "touched. Kept, because they are not this input's alone: .iterate/accepted.json (it covers every "
            "file below its directory; withdraw an entry by editing it) and the LLM answer cache (keyed by "
            "prompt, ITERATE_CACHE_DIR)."
        ),
    )
    p.add_argument(
        "out_dir", metavar="OUT_DIR", type=Path, help="a directory written by iterate analyze --out"
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(visible(f"iterate delete: {message}"), file=sys.stderr)
    return 2


def _input_path(out: Path) -> Path | None:
    """The analysed input's resolved path as the run recorded it (the script library's dataset id)."""
    import json

    from iterate.cli.rundir import MARKER

    try:
        marker = json.loads((out / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict):
        return None
    if isinstance(marker.get("inputCopy"), str):  # data read from stdin, kept in the run directory
        return (out / marker["inputCopy"]).resolve()
    return Path(marker["sourcePath"]).resolve() if isinstance(marker.get("sourcePath"), str) else None


def _scripts_folder(source: Path | None) -> Path | None:
    from iterate.library.local import LocalScriptLibrary
    from iterate.settings import Settings, library_enabled

    settings = Settings.from_env()
    if source is None or not settings.script_library or not library_enabled(settings):
        return None
    folder = LocalScriptLibrary(settings.script_library).folder("local", str(source))
    return folder if folder.is_dir() else None


def run(args: argparse.Namespace) -> int:
    """0 when deleted (or listed with --dry-run); 2 when OUT_DIR holds no run."""
    from iterate.accepted import find_accepted
    from iterate.cli.rundir import OWNED_DIRS, OWNED_FILES, is_staging, owner

    out: Path = args.out_dir
    if not out.is_dir():
        return _fail(f"{out} is not a directory — give a directory written by iterate analyze --out")
    source_name = owner(out)
    if source_name is None:
        return _fail(f"{out} holds no Iterate run — nothing deleted")
    source = _input_path(out)
    owned = {*OWNED_FILES, *OWNED_DIRS, FIX_VERSIONS}
    doomed = sorted(e for e in out.iterdir() if e.name in owned or is_staging(e.name))
    kept = sorted(e.name for e in out.iterdir() if e not in doomed)
    scripts = _scripts_folder(source)
    verb = "would delete" if args.dry_run else "deleted"
    for entry in doomed:
        print(f"{verb}: {visible(entry)}{'/' if entry.is_dir() and not entry.is_symlink() else ''}")
    if scripts is not None:
        print(f"{verb}: {visible(scripts)}/ (stored proofs of {visible(source_name)})")
    if args.dry_run:
        return 0
    for entry in doomed:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    if scripts is not None:
        shutil.rmtree(scripts)
    if kept:
        print(f"kept {visible(out)}: it holds files that are not Iterate's ({visible(', '.join(kept[:5]))})")
    else:
        out.rmdir()
    accepted = find_accepted(source.parent) if source is not None else None
    if accepted is not None:
        print(f"kept {visible(accepted)}: accepted issues cover every file below its directory")
    return 0
