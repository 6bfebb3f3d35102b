"""The script library (seed 003's feedback loop): proofs one run stored, rerun first by the next run.

A script is stored when LLM-written code proved an issue (the engine's own templates cost nothing to write
again and are current with the engine, so they are not kept). It is keyed by owner and dataset, and matched
to a later run's issue by what it proves (issue type, detector, rule and columns), never by run ids. It is
offered only where every column it reads still exists with the same type, and only when the agent would
otherwise spend tokens (a detector issue's free template still goes first). Stored code is untrusted on
reload: its hash must match the index, the static policy must accept it, it runs in the sandbox, and its
counts must prove the *current* issue exactly as fresh LLM code must; if not, it becomes the attempt the
agent starts from.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import threading
from collections.abc import Iterable
from datetime import UTC, datetime

from iterate import __version__
from iterate.contracts import (
    CodeInvestigation,
    ColumnProfile,
    DatasetProfile,
    Issue,
    ReusedScript,
    StoredScript,
)
from iterate.investigate.loop import confirm, needed_columns, template_first, validate
from iterate.ports import InvestigationAgent, ScriptLibrary

log = logging.getLogger("iterate.library")

# What a stored proof must still earn when it runs again, and what a proof must have earned to be stored:
# confirmed by an engine recount, or (a hypothesis, or code that gave no cell count) unverified, which is
# the most LLM-written code can earn where nothing recounts it. Reuse never raises a status.
PROOF_STATUSES = frozenset({"confirmed", "unverified"})
MAX_CODE_CHARS = 20_000  # the same cap as code Claude writes
# Semantic types that differ by how values repeat, not by what they look like: more rows may move a column
# from one to the other without changing what code reading it can assume.
_TYPE_FAMILY = {"categorical": "text", "text": "text"}


def column_type(column: ColumnProfile) -> str:
    """A column's type as the library compares it (the profile's semantic type, text kinds folded)."""
    return _TYPE_FAMILY.get(column.semanticType, column.semanticType)


def schema_fingerprint(profile: DatasetProfile) -> str:
    """Hash of every column's name and type, in order."""
    pairs = [[c.name, column_type(c)] for c in profile.columns]
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode()).hexdigest()[:32]


def _rule(issue: Issue) -> str | None:
    rule = issue.evidence.stats.get("rule") if issue.evidence is not None else None
    return rule if isinstance(rule, str) else None


def script_id(issue: Issue) -> str:
    """What a script proves, hashed: issue type, who found it, the detector's rule and the columns.

    The same problem in a later run of the dataset gets the same id whatever that run's ids or counts.
    """
    columns = sorted(needed_columns(issue) or ("*",))
    key = [issue.type, issue.source, issue.detector, _rule(issue), columns]
    return hashlib.sha256(json.dumps(key, ensure_ascii=False).encode()).hexdigest()[:32]


def columns_read(issue: Issue, code: str, profile: DatasetProfile) -> list[str]:
    """The columns a script depends on: its issue's, and every column its code names in a string literal
    (every column for an issue about whole rows)."""
    names = [c.name for c in profile.columns]
    needed = needed_columns(issue)
    if needed is None:
        return names
    known = set(names)
    found = [n for n in needed if n in known]
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return found
    literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return list(dict.fromkeys([*found, *(n for n in names if n in literals)]))


def disproof(issue: Issue, investigation: CodeInvestigation) -> str | None:
    """Why this successful run does not prove the issue (None when it does), as a fresh LLM proof is judged."""
    checked = confirm(issue, investigation)
    if checked.status in PROOF_STATUSES:
        return None
    output = investigation.output if isinstance(investigation.output, dict) else {}
    counted = f"it counted {output.get('affected_rows')} affected rows"
    if output.get("affected_cells") is not None:
        counted += f" and {output.get('affected_cells')} cells"
    if issue.source == "detector" and issue.evidence is not None:
        claim = (
            f"the detector found {issue.evidence.affectedRows} rows and {issue.evidence.affectedCells} cells"
        )
    else:
        claim = "a hypothesis needs at least one affected row"
    return f"{counted}; {claim}"


def stored_entry(
    issue: Issue,
    profile: DatasetProfile,
    *,
    owner: str,
    dataset_id: str,
    run_id: str,
    now: datetime | None = None,
) -> StoredScript | None:
    """The library entry for an issue's proof, or None when it is not a proof worth keeping."""
    inv = issue.investigation
    if inv is None or not inv.success or inv.source != "llm" or issue.status not in PROOF_STATUSES:
        return None
    code = inv.code
    if not code.strip() or len(code) > MAX_CODE_CHARS or inv.reused is not None:
        return None  # a reused proof is in the library already, unchanged
    output = inv.output if isinstance(inv.output, dict) else {}
    types = {c.name: column_type(c) for c in profile.columns}
    return StoredScript(
        scriptId=script_id(issue),
        owner=owner,
        datasetId=dataset_id,
        issueType=issue.type,
        issueSource=issue.source,
        detector=issue.detector,
        rule=_rule(issue),
        columns={n: types[n] for n in columns_read(issue, code, profile)},
        schemaFingerprint=schema_fingerprint(profile),
        codeSha256=code_hash(code),
        source=inv.source,
        status=issue.status,  # type: ignore[arg-type]
        affectedRows=int(output.get("affected_rows", 0)),
        issueId=issue.id,
        runId=run_id,
        storedAt=(now or datetime.now(UTC)).isoformat(timespec="seconds"),
        engineVersion=__version__,
    )


def code_hash(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


def store_proofs(
    issues: Iterable[Issue],
    library: ScriptLibrary,
    profile: DatasetProfile,
    *,
    owner: str,
    dataset_id: str,
    run_id: str,
) -> list[str]:
    """Store every issue's proof that is worth keeping; returns the script ids stored. Never raises: a
    library that cannot be written costs the next run tokens, not this run its report."""
    stored: list[str] = []
    for issue in issues:
        entry = stored_entry(issue, profile, owner=owner, dataset_id=dataset_id, run_id=run_id)
        if entry is None or issue.investigation is None:
            continue
        try:
            library.save(entry, issue.investigation.code)
        except Exception as exc:
            log.warning("script not stored", extra={"issue": issue.id, "error": type(exc).__name__})
            continue
        stored.append(entry.scriptId)
    return stored


def _policy_refuses(code: str) -> bool:
    try:
        from iterate.sandbox.policy import check_policy
    except ImportError:  # a function shipped without the sandbox package: the sandbox still checks
        return False
    return bool(check_policy(code))


class Shelf:
    """One run's view of its dataset's stored scripts: offers each issue its stored proof, at most once.

    The index is read on first use, code only for a script that matches. `check_policy=False` (red teams
    only, ITERATE_SANDBOX_INPROCESS_CHECKS=0) leaves the policy to the sandbox alone.
    """

    def __init__(
        self,
        library: ScriptLibrary,
        *,
        owner: str,
        dataset_id: str,
        profile: DatasetProfile,
        check_policy: bool = True,
    ) -> None:
        self.library = library
        self.owner = owner
        self.dataset_id = dataset_id
        self.profile = profile
        self.check_policy = check_policy
        self._types = {c.name: column_type(c) for c in profile.columns}
        self._entries: dict[str, StoredScript] | None = None
        self._offered: set[str] = set()
        self._lock = threading.Lock()

    def _index(self) -> dict[str, StoredScript]:
        with self._lock:
            if self._entries is None:
                try:
                    found = self.library.entries(self.owner, self.dataset_id)
                except Exception as exc:  # an unreachable library means no reuse, never a failed run
                    log.warning("script library unreadable", extra={"error": type(exc).__name__})
                    found = []
                # Adapters key by owner; checking again costs nothing and survives an adapter bug.
                self._entries = {
                    e.scriptId: e for e in found if e.owner == self.owner and e.datasetId == self.dataset_id
                }
            return self._entries

    def match(self, issue: Issue) -> StoredScript | None:
        """The stored script for what this issue is, if every column it reads has the type it had."""
        entry = self._index().get(script_id(issue))
        if entry is None or entry.issueType != issue.type or entry.issueSource != issue.source:
            return None
        if any(self._types.get(name) != kind for name, kind in entry.columns.items()):
            return None
        return entry

    def offer(
        self, issue: Issue, attempts: list[CodeInvestigation], agent: InvestigationAgent
    ) -> tuple[str, ReusedScript] | None:
        """The stored code to run next for this issue, or None to let the agent write it.

        Offered once per issue, only where the agent would spend tokens: not before a detector issue's
        free template has had its first attempt.
        """
        if any(a.reused is not None for a in attempts):
            return None
        if not attempts and template_first(agent, issue):
            return None
        entry = self.match(issue)
        if entry is None:
            return None
        with self._lock:
            if entry.scriptId in self._offered:  # two issues of one kind: the second gets fresh code
                return None
            self._offered.add(entry.scriptId)
        try:
            code = self.library.code(entry)
        except Exception as exc:
            log.warning(
                "stored script unreadable", extra={"script": entry.scriptId, "error": type(exc).__name__}
            )
            return None
        if code is None or len(code) > MAX_CODE_CHARS or code_hash(code) != entry.codeSha256:
            return None
        if any(code.strip() == a.code.strip() for a in attempts):
            return None
        if self.check_policy and _policy_refuses(code):
            log.warning("stored script refused by the sandbox policy", extra={"script": entry.scriptId})
            return None
        return code, ReusedScript(scriptId=entry.scriptId, storedAt=entry.storedAt, runId=entry.runId)

    def judge(
        self, issue: Issue, run: CodeInvestigation, reused: ReusedScript, *, attempt: int
    ) -> CodeInvestigation:
        return reused_outcome(issue, run, reused, attempt=attempt)


def reused_outcome(
    issue: Issue, run: CodeInvestigation, reused: ReusedScript, *, attempt: int
) -> CodeInvestigation:
    """A stored script's sandbox run, judged as fresh LLM code is: validated, then its counts must prove
    the current issue. One that fails or disagrees is a failed attempt saying why (the agent's start)."""
    checked = validate(run).model_copy(update={"attempts": attempt, "source": "llm", "reused": reused})
    origin = f"the script stored by run {reused.runId} at {reused.storedAt}"
    if not checked.success:
        return checked.model_copy(
            update={"error": f"{origin} failed on this data: {checked.error or 'error'}"}
        )
    why = disproof(issue, checked)
    if why is None:
        return checked
    return checked.model_copy(
        update={
            "success": False,
            "stopped": "invalid_output",
            "error": f"{origin} ran, but no longer proves this issue: {why}",
        }
    )
