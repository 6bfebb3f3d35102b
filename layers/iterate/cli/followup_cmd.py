"""`iterate followup RUN_DIR ISSUE_ID [--answer KEY]`: the fix conversation for one issue, one question at a time."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from iterate.contracts import FixAction, FollowupTurn, Issue, SmartFixFollowup
from iterate.issueref import resolve, short_ids
from iterate.ports import FollowupAgent
from iterate.settings import Settings
from iterate.visible import json_visible, visible


class _InputError(Exception):
    """A problem with the command line or the run directory: one line on stderr, exit code 2."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "followup",
        help="guide the fix of one issue, one multiple-choice question at a time",
        description=(
            "Shows the next question about how to fix ISSUE_ID of the run in RUN_DIR (a directory written by "
            "`iterate analyze --out`). Answer with --answer KEY (the first question can be "
            "answered without printing it first; --answer again changes an answer, --reset starts over); the "
            "conversation is kept in RUN_DIR/followups/ISSUE_ID.json and ends with a concrete fix action, which "
            "`iterate fix RUN_DIR` applies. Answers are final once the fix is applied. Works on quick and smart "
            "fixes alike; a new run into RUN_DIR starts every conversation afresh."
        ),
    )
    p.add_argument("run_dir", metavar="RUN_DIR", type=Path)
    p.add_argument("issue_id", metavar="ISSUE_ID")
    p.add_argument(
        "--answer", metavar="KEY", help="the key of the option you choose for the pending question"
    )
    p.add_argument(
        "--reset",
        action="store_true",
        help="forget this issue's answers and start its conversation again (until its fix is applied)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the step as JSON instead of text: issueId, question (its options and the action each "
        "leads to), action (once decided), turns",
    )
    p.set_defaults(func=run)


def load_issue(run_dir: Path, issue_id: str) -> Issue:
    path = run_dir / "analysis.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise _InputError(f"{path} not found: run `iterate analyze FILE --out {run_dir}` first") from exc
    except ValueError as exc:
        raise _InputError(f"{path} is not valid JSON") from exc
    issue_id = resolve(issue_id, (str(raw.get("id")) for raw in data.get("issues", []))) or issue_id
    for raw in data.get("issues", []):
        if raw.get("id") == issue_id:
            try:
                return Issue.model_validate(raw)
            except ValidationError as exc:
                raise _InputError(f"issue {issue_id} in {path} does not match the Issue contract") from exc
    ids = ", ".join(str(i.get("id")) for i in data.get("issues", [])[:20])
    raise _InputError(f"no issue {issue_id!r} in {path} (issues: {ids or 'none'})")


def history_path(run_dir: Path, issue_id: str) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in issue_id)
    return run_dir / "followups" / f"{safe}.json"


def load_history(path: Path) -> list[FollowupTurn]:
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [FollowupTurn.model_validate(t) for t in data.get("turns", [])]
    except (ValueError, ValidationError) as exc:
        raise _InputError(f"{path} is damaged; delete it to start the conversation again") from exc


def applied_in(path: Path) -> str | None:
    """The version a conversation's fix was applied in (`iterate fix` marks it), or None."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = body.get("appliedIn") if isinstance(body, dict) else None
    return str(version) if version else None


def save_history(path: Path, issue_id: str, turns: list[FollowupTurn], action: FixAction | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "issueId": issue_id,
        "turns": [t.model_dump(mode="json") for t in turns],
        "action": action.model_dump(mode="json") if action else None,
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def followup_agent(settings: Settings) -> FollowupAgent:
    """Claude (falling back to the rules) with a key; the rule-based agent without one."""
    if settings.anthropic_api_key:
        from iterate.agents import build_agents

        return build_agents(settings).followup
    from iterate.agents.offline.followup import OfflineFollowupAgent

    return OfflineFollowupAgent()


def render_question(q: SmartFixFollowup, run_dir: Path, issue_id: str) -> str:
    """The question as terminal lines; every piece from the data or an LLM has its controls made visible."""
    lines = [visible(q.prompt)]
    if q.examples:
        lines.append(f"  e.g. {visible(q.examples)}")
    lines += [f"  [{visible(o.key)}] {visible(o.label)}" for o in q.options]
    lines.append(f"Answer with: iterate followup {visible(run_dir)} {visible(issue_id)} --answer KEY")
    return "\n".join(lines)


def render_action(action: FixAction) -> str:
    params = json_visible(json.dumps(action.parameters, ensure_ascii=False, sort_keys=True))
    return f"Fix action: {visible(action.action)} {params}"


def run(
    args: argparse.Namespace, *, agent: FollowupAgent | None = None, settings: Settings | None = None
) -> int:
    from iterate.agents import FollowupError, followup

    try:
        issue = load_issue(args.run_dir, args.issue_id)
        path = history_path(args.run_dir, issue.id)
        version = applied_in(path)
        reset = getattr(args, "reset", False)
        if version is not None and (args.answer is not None or reset):
            raise _InputError(
                f"the fix of {issue.id} was applied in {args.run_dir / 'versions' / version}; its answers are "
                "final — analyse that version to go on"
            )
        if reset and path.exists():
            path.unlink()
        history = load_history(path)
        chosen = agent or followup_agent(settings or Settings.from_env())
        try:
            step = followup(chosen, issue, history, args.answer)
        except FollowupError as exc:
            raise _InputError(str(exc)) from exc
        refused = unfixable(args.run_dir, issue, step.action)
        if refused:  # what `iterate fix` would refuse is refused now, before the answer is recorded
            raise _InputError(refused)
    except _InputError as exc:
        print(f"iterate followup: {visible(exc)}", file=sys.stderr)
        return 2
    if version is None:  # an applied conversation keeps its mark
        save_history(path, issue.id, step.history, step.action)
    if args.json:
        print(
            json.dumps(
                {
                    "issueId": issue.id,
                    "question": step.question.model_dump(mode="json") if step.question else None,
                    "action": step.action.model_dump(mode="json") if step.action else None,
                    "turns": len(step.history),
                },
                indent=2,
            )
        )
    elif step.question is not None:
        print(render_question(step.question, args.run_dir, issue.id))
    elif step.action is not None:
        print(render_action(step.action))
        if step.action.action == "keep":
            # Keeping is this run's answer only: the next run finds the issue again unless it is accepted.
            handle = short_ids([issue.id])[issue.id]
            print(
                f"The next run will report it again; to let it pass: iterate accept {visible(args.run_dir)} "
                f'{handle} --reason "..."'
            )
    return 0


def unfixable(run_dir: Path, issue: Issue, action: FixAction | None) -> str | None:
    """Why `iterate fix` could not apply `action` to `issue` (the run holds none of the cells it would touch),
    or None. Reads flags.csv only, not the data."""
    from iterate.fix.version import NO_EVIDENCE, evidence_kind, flagged_cells, issue_column

    if action is None or action.action in ("keep", "ask_next"):
        return None
    columns = [*issue.affectedColumns, *([c] if (c := issue_column(issue)) else [])]
    if evidence_kind(issue, flagged_cells(run_dir / "flags.csv", columns)) is not None:
        return None
    return f"{issue.id}: {visible(action.action)} cannot be applied: {NO_EVIDENCE}; answer keep instead"
