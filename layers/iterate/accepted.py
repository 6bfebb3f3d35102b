"""Accepted issues (`iterate accept`, `POST /datasets/{id}/accepted`): the value fingerprint and the matching.

An acceptance is matched to a later run's issue by the issue's type, its columns and the values it flags, never
by a run id: the values are kept as hashes (sha256, 16 hex digits each) of the distinct flagged values, and an
issue matches when every value it flags now is among them. So a rerun of the same file matches; a file that
gains rows with the same bad values matches (the issue is marked `grown` when it affects more cells than when
it was accepted: still accepted, but flagged so a reader can look again); a new kind of bad value (a value
never seen when the issue was accepted) does not match, and fails the gate until it is accepted too.

Locally the acceptances are in `.iterate/accepted.json`: the nearest one found walking up from the input
file's directory (so one file in a repository's root covers the data files below it), or `<input's
directory>/.iterate/accepted.json` when there is none yet; `--accepted PATH` names another. On AWS they are
DynamoDB items of the dataset, applied by the report step of later runs.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from iterate.contracts import Acceptance, AcceptedFile, AcceptedMark, Issue
from iterate.ports import ArtifactStore

ACCEPTED_DIR = ".iterate"
ACCEPTED_NAME = "accepted.json"
# An acceptance lists the hashes of the values it covers: an issue over more distinct values than this is a
# problem to fix, not one to accept value by value.
MAX_ACCEPTED_VALUES = 10_000
FLAGS = "flags.csv"
DATA = "data.parquet"


class AcceptError(Exception):
    """An acceptance cannot be recorded or read: one line saying what, where and what to do (exit code 2)."""


def value_hash(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def find_accepted(start: Path) -> Path | None:
    """The nearest `.iterate/accepted.json` in `start` or a directory above it, or None."""
    here = start.resolve()
    for d in (here, *here.parents):
        candidate = d / ACCEPTED_DIR / ACCEPTED_NAME
        if candidate.is_file():
            return candidate
    return None


def accepted_path_for(input_dir: Path) -> Path:
    """Where the acceptances of a file in `input_dir` are: the nearest existing file, else a new one beside it."""
    return find_accepted(input_dir) or input_dir.resolve() / ACCEPTED_DIR / ACCEPTED_NAME


def load_accepted(path: Path) -> AcceptedFile:
    """The acceptances in `path` (none when it does not exist); AcceptError when it is not a valid file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return AcceptedFile()
    except OSError as exc:
        raise AcceptError(f"{path}: cannot be read ({exc.strerror or exc}) — check its permissions") from exc
    try:
        return AcceptedFile.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the file"
        raise AcceptError(
            f"{path}: not a valid accepted-issues file ({where}: {first['msg']}) — fix it or delete it"
        ) from exc


def save_accepted(path: Path, accepted: AcceptedFile) -> None:
    """Write `path` whole (a temporary file renamed over it, so a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(accepted.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n", "utf-8")
    tmp.replace(path)


def issue_values(store: ArtifactStore, issue_ids: Iterable[str]) -> dict[str, set[str]]:
    """The distinct values of the cells each issue flags (from the run's flags.csv and data.parquet)."""
    wanted = set(issue_ids)
    out: dict[str, set[str]] = {i: set() for i in wanted}
    if not wanted or not store.exists(FLAGS) or not store.exists(DATA):
        return out
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    data = io.BytesIO(store.get_bytes(DATA))
    stored = set(pq.read_schema(data).names)
    cells: dict[tuple[str, str], list[int]] = {}
    reader = csv.DictReader(io.StringIO(store.get_bytes(FLAGS).decode("utf-8")))
    for line in reader:
        if line["issue_id"] in wanted and line["column"] in stored:
            cells.setdefault((line["issue_id"], line["column"]), []).append(int(line["row"]))
    if not cells:
        return out
    # Only the flagged columns are read, and each issue's values are taken and deduplicated by pyarrow.
    table = pq.read_table(data, columns=sorted({column for _, column in cells}))
    for (issue_id, column), rows in cells.items():
        values = pc.unique(table.column(column).take(pa.array(rows, pa.int64())))
        out[issue_id].update("" if v is None else str(v) for v in values.to_pylist())
    return out


def cell_count(issue: Issue) -> int:
    """How much of the data the issue affects: its cells, or its rows when it counts none."""
    if issue.evidence is not None and issue.evidence.affectedCells:
        return issue.evidence.affectedCells
    return issue.affectedRows or 0


def accept(issue: Issue, values: set[str], *, reason: str, by: str, at: str | None = None) -> Acceptance:
    """An acceptance of `issue` (whose flagged cells hold `values`); AcceptError when it cannot be one."""
    reason = reason.strip()
    if not reason:
        raise AcceptError("--reason is empty — say why the issue is accepted (it is shown beside the issue)")
    if len(values) > MAX_ACCEPTED_VALUES:
        raise AcceptError(
            f"{issue.id} flags {len(values):,} distinct values, more than the {MAX_ACCEPTED_VALUES:,} an "
            "acceptance can list — fix the data or the rule instead"
        )
    return Acceptance(
        type=issue.type,
        columns=list(issue.affectedColumns),
        valueHashes=sorted({value_hash(v) for v in values}),
        cells=cell_count(issue),
        reason=reason,
        by=by,
        at=at or datetime.now(UTC).isoformat(timespec="seconds"),
        issueId=issue.id,
        id=uuid.uuid4().hex[:12],
    )


def matches(acceptance: Acceptance, issue: Issue, values: set[str]) -> bool:
    """Same type, same columns, and no value the acceptance did not cover."""
    if acceptance.type != issue.type or acceptance.columns != list(issue.affectedColumns):
        return False
    known = set(acceptance.valueHashes)
    return all(value_hash(v) in known for v in values)


def with_acceptances(
    issues: list[Issue], acceptances: list[Acceptance], values: dict[str, set[str]]
) -> list[Issue]:
    """`issues`, each marked accepted when an acceptance matches it (the latest one when several do)."""
    out = []
    for issue in issues:
        found = [a for a in acceptances if matches(a, issue, values.get(issue.id, set()))]
        if not found:
            out.append(issue.model_copy(update={"accepted": None}))
            continue
        a = max(found, key=lambda x: x.at)
        mark = AcceptedMark(
            reason=a.reason,
            by=a.by,
            at=a.at,
            acceptance=a.id,
            cellsWhenAccepted=a.cells,
            grown=cell_count(issue) > a.cells,
        )
        out.append(issue.model_copy(update={"accepted": mark}))
    return out


def apply_accepted(issues: list[Issue], acceptances: list[Acceptance], store: ArtifactStore) -> list[Issue]:
    """Mark the run's issues that an acceptance covers (the run's flagged values are read only when needed)."""
    if not acceptances:
        return issues
    types = {(a.type, tuple(a.columns)) for a in acceptances}
    candidates = [i.id for i in issues if (i.type, tuple(i.affectedColumns)) in types]
    return with_acceptances(issues, acceptances, issue_values(store, candidates))
