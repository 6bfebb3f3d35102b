"""Fixes as new dataset versions: choose each issue's action, apply it to the cells the run's evidence names,
write the result beside the run in the input's format with changes.csv and version.json."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from iterate.contracts import READ_LEVEL_TYPES, FixAction, Issue
from iterate.fix.engine import (
    APPLIED_ACTIONS,
    DESTRUCTIVE,
    Change,
    FixError,
    FixResult,
    FixStep,
    apply_fixes,
    needs_confirmation,
)
from iterate.fix.version import (
    RunInput,
    flagged_cells,
    plan,
    run_input,
    sha256_of,
    write_changes,
    write_version,
)
from iterate.issueref import resolve

__all__ = [
    "APPLIED_ACTIONS",
    "DESTRUCTIVE",
    "Change",
    "Chosen",
    "FixError",
    "FixResult",
    "FixStep",
    "Prepared",
    "apply_fixes",
    "choose",
    "fix_input",
    "needs_confirmation",
    "prepare",
    "write",
    "write_version_dir",
]

VERSIONS = "versions"


@dataclass(frozen=True)
class Chosen:
    """An issue, the action it gets, and where the action came from (the user's answers, or the quick default)."""

    issue: Issue
    action: FixAction
    answers: list[str]
    by: str  # "followup" | "quick default"


def _followup_file(run_dir: Path, issue_id: str) -> Path:
    from iterate.cli.followup_cmd import history_path

    return history_path(run_dir, issue_id)


def _answered(run_dir: Path, issue_id: str) -> tuple[FixAction | None, list[str], bool]:
    """The action a finished follow-up ended with, the answers given, and whether a conversation exists."""
    path = _followup_file(run_dir, issue_id)
    if not path.is_file():
        return None, [], False
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        action = FixAction.model_validate(body["action"]) if body.get("action") else None
        answers = [str(t["answer"]) for t in body.get("turns", []) if t.get("answer") is not None]
    except (ValueError, KeyError, TypeError) as exc:
        raise FixError(
            f"{path} is damaged: `iterate followup {run_dir} {issue_id} --reset` starts it again"
        ) from exc
    return action, answers, True


def quick_default(issue: Issue) -> FixAction | None:
    """A quick fix's action without a conversation: the first choice the follow-up offers for it."""
    from iterate.agents.offline.followup import main_question

    q = main_question(issue)
    first = (q.onResponse or {}).get(q.options[0].key)
    return None if first is None or first.action == "ask_next" else first


Answered = Callable[[str], tuple[FixAction | None, list[str], bool]]


def choose(
    issues: list[Issue], ids: list[str], quick: bool, answered: Answered, hint: Callable[[str], str]
) -> tuple[list[Chosen], list[str]]:
    """The fixes to apply and notes on issues left out: the named ids (or, when none is named, every issue whose
    follow-up has ended) and, with `quick`, every quick fix. A smart fix needs its follow-up answered.

    `answered(issue_id)` is (the action its follow-up ended with or None, the answers given, whether a
    conversation exists); `hint(issue_id)` says how to answer it (a command, or an API route)."""
    by_id = {i.id: i for i in issues}
    ids = [resolve(i, by_id) or i for i in ids]  # a handle from the summary names its issue
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        listed = ", ".join(i.id for i in issues[:20]) or "none"
        raise FixError(f"no issue {unknown[0]!r} in the run (issues: {listed})")
    wanted = list(dict.fromkeys(ids))
    if not ids:
        wanted = [i.id for i in issues if answered(i.id)[0] is not None]
    if quick:
        wanted += [i.id for i in issues if i.category == "quick_fixes" and i.id not in wanted]
    if not wanted and quick:
        waiting = [i.id for i in issues if i.type not in READ_LEVEL_TYPES]
        listed = ", ".join(waiting[:5]) + (", …" if len(waiting) > 5 else "")
        raise FixError(
            "no quick fixes in this run"
            + (
                f"; {len(waiting)} issue{'s' if len(waiting) != 1 else ''} need an answer first: {listed} "
                f"({hint('ISSUE_ID')})"
                if waiting
                else ""
            )
        )
    if not wanted:
        raise FixError(
            f"nothing to fix: name issues, ask for the quick fixes, or answer a follow-up first ({hint('ISSUE_ID')})"
        )
    chosen: list[Chosen] = []
    notes: list[str] = []
    for issue_id in wanted:
        issue = by_id[issue_id]
        if issue.type in READ_LEVEL_TYPES:
            notes.append(f"{issue_id}: a problem of the file's layout; export the file again to fix it")
            continue
        action, answers, talked = answered(issue_id)
        if action is not None:
            chosen.append(Chosen(issue, action, answers, "followup"))
            continue
        named = issue_id in ids
        if issue.category != "quick_fixes":
            notes.append(f"{issue_id} is a smart fix: choose how with {hint(issue_id)} first")
            continue
        if talked and named:
            notes.append(
                f"{issue_id}: its follow-up is not finished — answer it ({hint(issue_id)}) or reset it"
            )
            continue
        default = quick_default(issue)
        if default is None:
            notes.append(f"{issue_id}: no fix without a choice: {hint(issue_id)}")
            continue
        chosen.append(Chosen(issue, default, [], "quick default"))
    if not chosen and any(i in ids for i in wanted):
        # Nothing can be applied of what was named: say why instead of writing an unchanged file.
        raise FixError("; ".join(notes[:3]))
    return chosen, notes


@dataclass
class Prepared:
    """Everything a fix run decided before writing: the input, the plan and its result."""

    source: RunInput
    chosen: list[Chosen]
    steps: list[FixStep]
    result: FixResult
    notes: list[str] = field(default_factory=list)
    table: Any = None  # the input as read (iterate.table.Table)


def prepare(run_dir: Path, ids: list[str], *, quick: bool) -> Prepared:
    """Read the run's input (checked to be what the run read) and apply the chosen fixes in memory."""
    source = run_input(run_dir)
    chosen, notes = choose(
        source.analysis.issues,
        ids,
        quick,
        lambda issue_id: _answered(run_dir, issue_id),
        lambda issue_id: f"`iterate followup {run_dir} {issue_id}`",
    )
    return fix_input(source, chosen, notes, run_dir / "flags.csv")


def fix_input(source: RunInput, chosen: list[Chosen], notes: list[str], flags_csv: Path) -> Prepared:
    """Apply the chosen fixes to the run's input in memory (the local command and the AWS route alike)."""
    from iterate.io import DatasetReadError, read_table

    active = [c for c in chosen if c.action.action != "keep"]
    try:
        table = read_table(source.path)
    except DatasetReadError as exc:
        raise FixError(str(exc)) from exc
    if table.source.content_hash != source.sha256:
        raise FixError(f"{source.path} is not the file the run read (its sha256 differs): analyse it again")
    if len(set(table.column_names)) != len(table.column_names):
        raise FixError(
            f"{source.path} repeats a column name; rename the columns so each fix knows its column"
        )
    flags = flagged_cells(flags_csv, table.column_names)
    steps = plan([(c.issue, c.action) for c in active], table, flags)
    result = apply_fixes(table.to_arrow(), steps)
    notes = notes + list(result.failed.values())  # each names its issue; the other fixes were applied
    steps = [s for s in steps if s.issue_id not in result.failed]
    return Prepared(source=source, chosen=chosen, steps=steps, result=result, notes=notes, table=table)


def next_version_dir(run_dir: Path) -> Path:
    root = run_dir / VERSIONS
    taken = [int(p.name[1:]) for p in root.glob("v*") if p.name[1:].isdigit()] if root.is_dir() else []
    return root / f"v{max(taken, default=0) + 1}"


def write_version_dir(target_dir: Path, prepared: Prepared, version_id: str) -> tuple[Path, dict[str, Any]]:
    """Write the fixed file, changes.csv and version.json into `target_dir`; returns the file and version.json."""
    source, result = prepared.source, prepared.result
    target_dir.mkdir(parents=True, exist_ok=True)
    name = source.name
    if prepared.table.source.format == "xlsx":
        name = Path(name).with_suffix(".csv").name
    target = target_dir / name
    written_format = write_version(prepared.table, result, source.path, target)
    write_changes(result.changes, target_dir / "changes.csv")
    from iterate.fix.expected import blanks_of, expected_blanks, version_record

    # The parent's own deliberate blanks when it is a version itself: they stay the user's, version to version.
    inherited = blanks_of(version_record(source.path), source.sha256)
    blanks = expected_blanks(result, prepared.steps, inherited, prepared.table.n_rows)
    body = {
        "versionId": version_id,
        "createdAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "file": name,
        "format": written_format,
        "sha256": sha256_of(target),
        "rows": result.table.num_rows,
        "columns": result.table.num_columns,
        "parent": {
            "path": source.label,
            "sha256": source.sha256,
            "runId": source.run_id or None,
            "format": prepared.table.source.format,
        },
        "issuesApplied": [
            {"id": c.issue.id, "type": c.issue.type, "action": c.action.model_dump(mode="json"), "by": c.by}
            for c in prepared.chosen
        ],
        "answers": {c.issue.id: c.answers for c in prepared.chosen if c.answers},
        "counts": result.counts,
        "unchanged": result.skipped,
        "droppedRows": len(result.dropped_rows),
        "droppedColumns": result.dropped_columns,
        # Blanks the user asked for (cleared values, gaps kept as empty): the next run does not report them.
        "expectedBlanks": blanks,
        "notes": prepared.notes,
    }
    (target_dir / "version.json").write_text(
        json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return target, body


def write(run_dir: Path, prepared: Prepared) -> Path:
    """Write RUN_DIR/versions/vN/ (the new file, changes.csv, version.json); returns the new file's path."""
    target_dir = next_version_dir(run_dir)
    target_dir.mkdir(parents=True)
    target, _ = write_version_dir(target_dir, prepared, target_dir.name)
    for c in prepared.chosen:  # an applied fix's answers are final: followup refuses to change them
        path = _followup_file(run_dir, c.issue.id)
        if path.is_file():
            history = json.loads(path.read_text(encoding="utf-8"))
            history["appliedIn"] = target_dir.name
            path.write_text(json.dumps(history, indent=2) + "\n", encoding="utf-8")
    return target
