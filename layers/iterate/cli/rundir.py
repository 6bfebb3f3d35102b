"""The `--out` directory of `iterate analyze`: whose run it holds, and what a new run of the same file replaces.

A run directory belongs to one input file (by name, so a corrected export of `orders.csv` is the same
dataset and its new run is compared with the last one). Re-running it clears everything the previous run
wrote — its scripts, investigations and follow-up conversations included — so nothing stale is read later;
files that are not the run's are left alone. A directory of another input, or a non-empty directory that
holds no run, is refused instead of mixed into.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from iterate.contracts import AnalysisResult, Issue

# Written first into every run directory: which file the run is of.
MARKER = ".iterate-run.json"
# Everything a run writes (the pipeline's artifact keys, the scripts, the follow-ups of `iterate followup`).
OWNED_FILES = (
    "analysis.json",
    "report.html",
    "flags.csv",
    "profile.json",
    "understanding.json",
    "data.parquet",
    "candidates.json",
    "issues.json",
    MARKER,
)
OWNED_DIRS = ("scripts", "investigations", "steps", "followups", INPUT_DIR := "input")
# The local store's staging names (".analysis.json.tmp1234-5678"), left behind when a run was killed.
_STAGING = re.compile(r"^\..+\.tmp\d+-\d+$")


def is_staging(name: str) -> bool:
    """A staging file the local store left behind when a run was killed: the run's too."""
    return bool(_STAGING.match(name))


class RunDirError(Exception):
    """The directory cannot take this run: one line saying why and what to do (exit code 2)."""


@dataclass(frozen=True)
class Claimed:
    """What `claim` found: the previous run's issues (to compare with), and whose run was replaced."""

    previous_issues: list[Issue] | None
    replaced: str | None  # the source file name of the run that was cleared, if any


def owner(out: Path) -> str | None:
    """The input file name whose run `out` holds, or None when it holds no run."""
    try:
        marker = json.loads((out / MARKER).read_text(encoding="utf-8"))
        if isinstance(marker, dict) and isinstance(marker.get("sourceFile"), str):
            return str(marker["sourceFile"])
    except (OSError, ValueError):
        pass
    previous = _previous(out)  # a run written before the marker existed
    return previous.run.sourceFile if previous is not None and previous.run is not None else None


def _previous(out: Path) -> AnalysisResult | None:
    try:
        return AnalysisResult.model_validate_json((out / "analysis.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def source_dir(out: Path) -> Path | None:
    """The directory of the input file whose run `out` holds (None for stdin or a run written before it was
    recorded): where `iterate accept` looks for the accepted-issues file."""
    try:
        marker = json.loads((out / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    found = marker.get("sourcePath") if isinstance(marker, dict) else None
    return Path(found).parent if isinstance(found, str) else None


def claim(
    out: Path, source_name: str, source_path: Path | None = None, *, input_copy: Path | None = None
) -> Claimed:
    """Make `out` ready for a run of the file named `source_name` (at `source_path`), or raise RunDirError.

    A missing or empty directory is created; a run of the same file is cleared (its issues returned, for
    the comparison); anything else is refused, and nothing in it is touched. `source_path` (the input's
    absolute path; None for stdin) is recorded for `iterate fix`; data read from stdin is kept at `input_copy`
    (inside `out`, under INPUT_DIR) instead.
    """
    if out.exists() and not out.is_dir():
        raise RunDirError(f"{out} is a file, not a directory — give a directory with --out")
    entries = list(out.iterdir()) if out.is_dir() else []
    replaced = None
    previous_issues = None
    if entries:
        found = owner(out)
        if found is None:
            raise RunDirError(
                f"{out} is not empty and holds no Iterate run — give a new or empty directory with --out"
            )
        if found != source_name:
            raise RunDirError(
                f"{out} holds the run of {found}, not of {source_name} — give another directory with --out, "
                f"or delete {out} first"
            )
        previous = _previous(out)
        previous_issues = previous.issues if previous is not None else None
        _clear(out)
        replaced = found
    out.mkdir(parents=True, exist_ok=True)
    marker: dict[str, str] = {"sourceFile": source_name}
    if source_path is not None:
        marker["sourcePath"] = str(source_path)
    if input_copy is not None:  # data read from stdin, kept in the run directory for `iterate fix`
        marker["inputCopy"] = str(input_copy.relative_to(out))
    (out / MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
    return Claimed(previous_issues=previous_issues, replaced=replaced)


def _clear(out: Path) -> None:
    """Remove what a run owns in `out`; files of anyone else stay."""
    for entry in out.iterdir():
        name = entry.name
        if name not in OWNED_FILES and name not in OWNED_DIRS and not _STAGING.match(name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
