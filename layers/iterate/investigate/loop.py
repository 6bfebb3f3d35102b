"""The investigation loop: generate code, run it in the sandbox, validate, feed failures back, attach evidence."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Literal, Protocol

from iterate.contracts import (
    READ_LEVEL_TYPES,
    CodeInvestigation,
    DatasetProfile,
    Evidence,
    EvidenceExample,
    Issue,
    ReusedScript,
)
from iterate.investigate.projection import frame_columns
from iterate.ports import DatasetRef, InvestigationAgent, Sandbox


class Reuse(Protocol):
    """Stored proofs of earlier runs (iterate.library.Shelf): offered before the agent spends tokens."""

    def offer(
        self, issue: Issue, attempts: list[CodeInvestigation], agent: InvestigationAgent
    ) -> tuple[str, ReusedScript] | None: ...

    def judge(
        self, issue: Issue, run: CodeInvestigation, reused: ReusedScript, *, attempt: int
    ) -> CodeInvestigation: ...


class GenerationFailed(Exception):
    """The agent could not write code for this attempt (its message is fed into the failed investigation)."""


def supports(issue: Issue, agent: InvestigationAgent) -> bool:
    """Whether this issue gets an investigation: not read-level, and the agent says it can write the code."""
    if issue.type in READ_LEVEL_TYPES:
        return False
    check: Callable[[Issue], bool] | None = getattr(agent, "supports", None)
    return True if check is None else bool(check(issue))


def code_source(agent: InvestigationAgent) -> Literal["template", "llm"]:
    """Who wrote the code the agent returned last: the engine ("template") or an LLM. Read it right after
    write_code (a fallback agent decides per attempt); anything unknown counts as untrusted LLM code."""
    return "template" if getattr(agent, "source", "llm") == "template" else "llm"


def stop_reason(attempts: list[CodeInvestigation], max_attempts: int) -> str | None:
    """Why no further attempt should be made, or None to try again.

    A stored script rerun from the library is not one of the agent's attempts: it does not use one up.
    """
    if attempts and attempts[-1].success:
        return "succeeded"
    spent = sum(1 for a in attempts if a.reused is None)
    if spent >= max_attempts:
        return f"gave up after {spent} attempts"
    if len(attempts) >= 2 and attempts[-1].error and attempts[-1].error == attempts[-2].error:
        return "the same error repeated"
    return None


def next_code(
    issue: Issue,
    attempts: list[CodeInvestigation],
    *,
    agent: InvestigationAgent,
    profile: DatasetProfile,
    max_attempts: int = 3,
) -> str | None:
    """Code for the next attempt, or None to stop (success, attempts spent, or code/error repeating).

    The step-wise form of the loop for the AWS Map state (GenerateCode → RunInSandbox → Choice).
    Raises GenerationFailed when the agent itself fails.
    """
    if stop_reason(attempts, max_attempts) is not None:
        return None
    try:
        code = agent.write_code(issue, profile=profile, attempts=list(attempts))
    except Exception as exc:  # an agent failure ends this investigation, never the run
        raise GenerationFailed(f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(code, str) or not code.strip():
        raise GenerationFailed("the agent returned no code")
    if any(code.strip() == a.code.strip() for a in attempts):
        return None
    return code


def validate(investigation: CodeInvestigation) -> CodeInvestigation:
    """A sandbox success counts only when the output is a dict with an integer `affected_rows` ≥ 0."""
    if not investigation.success:
        return investigation
    output = investigation.output
    problem = None
    if not isinstance(output, dict):
        problem = f"output must be a JSON object, got {type(output).__name__}"
    else:
        rows = output.get("affected_rows")
        if isinstance(rows, bool) or not isinstance(rows, int):
            problem = "output must contain an integer `affected_rows`"
        elif rows < 0:
            problem = "`affected_rows` must be ≥ 0"
    if problem is None:
        return investigation
    return investigation.model_copy(update={"success": False, "stopped": "invalid_output", "error": problem})


def code_columns(issue: Issue, source: str, code: str) -> tuple[str, ...] | None:
    """The only columns `code` (written by `source`) reads for `issue`, None for every column: a template
    reads only the columns its issue names; other code (the model's, or a stored script) those its syntax
    shows it can reach (iterate.investigate.projection). On a wide, long file the rest is never fetched nor
    loaded."""
    if source == "template":
        return needed_columns(issue)
    return frame_columns(code) or None


def needed_columns(issue: Issue) -> tuple[str, ...] | None:
    """The columns an issue's template reads (from its parameters); None when it reads every column."""
    stats = issue.evidence.stats if issue.evidence else {}
    if issue.type in {"duplicate_rows", "near_duplicate_rows"}:
        return None
    names: list[str] = []
    for key in (
        "column",
        "other",
        "rhs",
        "left",
        "right",
        "lhs",
        "determinants",
        "dependents",
        "partners",
        "columns",
    ):
        value = stats.get(key)
        if isinstance(value, str):
            names.append(value)
        elif isinstance(value, list):
            # A list inside is several columns read together (a composite determinant).
            names += [n for v in value for n in (v if isinstance(v, list) else [v]) if isinstance(n, str)]
    derivation = stats.get("derivation")
    if isinstance(derivation, dict):
        names += [v for k, v in derivation.items() if k in ("left", "right") and isinstance(v, str)]
    facet = stats.get("facet")  # a conditional rule's condition is read from another column
    if isinstance(facet, dict) and isinstance(facet.get("column"), str):
        names.append(facet["column"])
    names += [c for c in issue.affectedColumns if c != "*"]
    return tuple(dict.fromkeys(names)) or None


def investigate_issue(
    issue: Issue,
    *,
    agent: InvestigationAgent,
    sandbox: Sandbox,
    data: DatasetRef,
    profile: DatasetProfile,
    max_attempts: int = 3,
    timeout_s: float | None = None,
    reuse: Reuse | None = None,
) -> CodeInvestigation:
    """Generate → run → validate, feeding failures back, for at most `max_attempts` attempts.

    reuse: the script library's proofs; where the agent would spend tokens, a stored script that matches
    the issue runs first (free when it still proves it; otherwise the agent's first earlier attempt).
    """
    attempts: list[CodeInvestigation] = []
    ended = ""
    while True:
        offered = reuse.offer(issue, attempts, agent) if reuse is not None else None
        if reuse is not None and offered is not None:
            stored, reused = offered
            # A stored script is untrusted code, however it was first written: its syntax says what it reads
            # (as on AWS, where GenerateCode sends it as the model's).
            narrowed = replace(data, columns=code_columns(issue, "llm", stored))
            run = sandbox.run(stored, narrowed, timeout_s=timeout_s)
            attempts.append(reuse.judge(issue, run, reused, attempt=len(attempts) + 1))
            if attempts[-1].success:
                return attempts[-1]
            continue
        try:
            code = next_code(issue, attempts, agent=agent, profile=profile, max_attempts=max_attempts)
        except GenerationFailed as exc:
            ended = f"the code generator failed: {exc}"
            break
        if code is None:
            reason = stop_reason(attempts, max_attempts)
            ended = reason or "the generator repeated the same code"
            break
        # Read after each write_code: a fallback agent says per attempt whether a template or Claude wrote it.
        source = code_source(agent)
        run = sandbox.run(code, replace(data, columns=code_columns(issue, source, code)), timeout_s=timeout_s)
        attempts.append(validate(run).model_copy(update={"attempts": len(attempts) + 1, "source": source}))
        if attempts[-1].success:
            return attempts[-1]
    if not attempts:
        return CodeInvestigation(
            code="", success=False, error=ended, stopped="error", attempts=1, source=code_source(agent)
        )
    last = attempts[-1]
    error = f"{last.error or 'failed'} (stopped retrying: {ended})"
    return last.model_copy(update={"error": error})


def _examples(raw: Any) -> list[EvidenceExample]:
    examples: list[EvidenceExample] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        try:
            examples.append(
                EvidenceExample(row=int(item["row"]), column=str(item["column"]), value=str(item["value"]))
            )
        except (KeyError, TypeError, ValueError):
            continue
        if len(examples) == 10:
            break
    return examples


def _share(output: dict[str, Any]) -> float:
    share = output.get("share")
    if isinstance(share, int | float) and not isinstance(share, bool) and 0.0 <= float(share) <= 1.0:
        return float(share)
    return 0.0


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def confirm(issue: Issue, investigation: CodeInvestigation | None) -> Issue:
    """Attach the investigation and set the status the recomputed numbers justify.

    Code the engine wrote (a template) is trusted to count: a detector issue is confirmed when it
    recomputes the detector's affected rows (unconfirmed, both numbers kept, when it disagrees), and a
    hypothesis is confirmed when it finds affected rows, taking its numbers from the code.

    Code an LLM wrote is not trusted to count, however cleanly it ran: its numbers must agree with an
    independent recount by engine code, which for a detector issue is the detector's own evidence
    (affected rows, and affected cells). Agreement confirms; disagreement leaves it unconfirmed; where
    there is nothing to check against (a hypothesis, or no cell count in the output) it is "unverified",
    never confirmed. A failed investigation leaves the status alone and says why it failed.
    """
    if investigation is None:
        return issue
    if not investigation.success:
        update: dict[str, Any] = {"investigation": investigation}
        if issue.evidence is not None:
            failed = {**issue.evidence.stats, "investigation_failed": investigation.error or "failed"}
            update["evidence"] = issue.evidence.model_copy(update={"stats": failed})
        return issue.model_copy(update=update)
    output = investigation.output if isinstance(investigation.output, dict) else {}
    recomputed = int(output.get("affected_rows", 0))
    trusted = investigation.source == "template"
    # An LLM's hypothesis carries no count worth checking (any number in it came from text, not code).
    claimed = None if issue.source == "llm" else issue.affectedRows
    if claimed is None and issue.evidence is not None and issue.source == "detector":
        claimed = issue.evidence.affectedRows
    if claimed is None:
        if recomputed <= 0:
            return issue.model_copy(update={"investigation": investigation, "status": "unconfirmed"})
        cells = _count(output.get("affected_cells"))
        stats: dict[str, Any] = {"investigation_affected_rows": recomputed}
        if not trusted:
            stats["recount"] = "none: the numbers come from LLM-written code alone"
        evidence = Evidence(
            affectedRows=recomputed,
            affectedCells=cells if cells is not None else recomputed,
            affectedShare=_share(output),
            examples=_examples(output.get("examples")),
            stats=stats,
        )
        return issue.model_copy(
            update={
                "investigation": investigation,
                "status": "confirmed" if trusted else "unverified",
                "affectedRows": recomputed,
                "evidence": evidence,
            }
        )
    status = "confirmed" if recomputed == claimed else "unconfirmed"
    extra: dict[str, Any] = {}
    stats_now = issue.evidence.stats if issue.evidence is not None else {}
    listed = stats_now.get("listed_rows")
    if status == "unconfirmed" and trusted and isinstance(listed, int) and recomputed == listed:
        # The detector listed only its first values (MAX_LISTED): the template recounted exactly the rows that
        # hold them. Confirmed for those, and said so beside both counts.
        status = "confirmed"
        n_values = len(stats_now.get("bad_values") or [])
        extra["recount"] = (
            f"the proof recounted the {n_values:,} values the detector lists: {recomputed:,} of the issue's "
            f"{claimed:,} rows"
        )
    if not trusted and status == "confirmed" and issue.evidence is not None:
        cells = _count(output.get("affected_cells"))
        if cells is None:
            status = "unverified"
            extra["recount"] = "rows agree with the detector; the code gave no affected_cells to check"
        elif cells != issue.evidence.affectedCells:
            status = "unconfirmed"
            extra.update(
                investigation_affected_cells=cells, detector_affected_cells=issue.evidence.affectedCells
            )
    update = {"investigation": investigation, "status": status}
    if issue.evidence is not None:
        stats = {**issue.evidence.stats, "investigation_affected_rows": recomputed, **extra}
        if recomputed != claimed:
            stats["detector_affected_rows"] = claimed
        update["evidence"] = issue.evidence.model_copy(update={"stats": stats})
    return issue.model_copy(update=update)


# How many first-attempt template proofs share one sandbox process (ITERATE_INVESTIGATION_BATCH=1), the
# most columns such a batch loads, and the most cells its templates read in all (rows x each one's
# columns, summed), which keeps a batch far inside the one timeout it gets (the per-issue one): on a long
# table batches shrink to a few proofs, where a run's fixed cost matters little anyway. Each run costs
# ~0.1-0.15 s of fixed overhead (a fork, namespaces, seccomp, a cgroup, the kill and its check); a template
# on a short table takes 1-4 ms with its policy check and compile. On the wide bench table (2,000 x 500):
# ~0.2 s for 40 proofs in one process, ~0.4 s for 100, ~0.8 s for 200.
DEFAULT_BATCH = 100
MAX_BATCH_COLUMNS = 64
MAX_BATCH_CELLS = 2_000_000


def batch_size(setting: int) -> int:
    """The batch size a setting means: 0 (or less) runs every proof alone, 1 the default size, n itself."""
    if setting <= 0:
        return 0
    return DEFAULT_BATCH if setting == 1 else setting


def template_first(agent: InvestigationAgent, issue: Issue) -> bool:
    """Whether the agent's first attempt for this issue is one of the engine's templates, known before it
    writes the code: the agent's own decision when it can say (FallbackInvestigation.template_first), else
    an agent that only ever writes templates (source "template" fixed on its class)."""
    ask: Callable[[Issue], bool] | None = getattr(agent, "template_first", None)
    if callable(ask):
        return bool(ask(issue))
    return getattr(type(agent), "source", None) == "template"


def plan_batches(
    issues: list[Issue],
    profile: DatasetProfile,
    size: int,
    max_columns: int = MAX_BATCH_COLUMNS,
    max_cells: int = MAX_BATCH_CELLS,
) -> list[list[int]]:
    """Indices of `issues` grouped into batches of at most `size`, issues on the same or nearby columns
    together, each batch's union of columns at most `max_columns` and the cells its issues read (rows x
    their columns, summed) at most `max_cells`. Issues that read every column (no needed columns) are left
    out: they run alone. Batches of one are left out too."""
    position = {c.name: i for i, c in enumerate(profile.columns)}
    rows = max(1, profile.rowCount)
    keyed: list[tuple[tuple[int, ...], int, tuple[str, ...]]] = []
    for index, issue in enumerate(issues):
        names = needed_columns(issue)
        if names is None or len(names) > max_columns:
            continue
        keyed.append((tuple(sorted(position.get(n, len(position)) for n in names)), index, names))
    keyed.sort()
    batches: list[list[int]] = []
    current: list[int] = []
    union: set[str] = set()
    cells = 0
    for _, index, names in keyed:
        more = rows * len(names)
        full = len(current) >= size or cells + more > max_cells
        if current and (full or len(union | set(names)) > max_columns):
            batches.append(current)
            current, union, cells = [], set(), 0
        current.append(index)
        union |= set(names)
        cells += more
    if current:
        batches.append(current)
    return [b for b in batches if len(b) > 1]


def investigate_batch(
    issues: list[Issue],
    *,
    agent: InvestigationAgent,
    sandbox: Any,
    data: DatasetRef,
    profile: DatasetProfile,
    timeout_s: float | None = None,
) -> list[CodeInvestigation | None]:
    """First-attempt template proofs of `issues` in one sandbox process (`sandbox.run_batch`).

    Per issue: its validated, successful investigation exactly as `investigate_issue` would return it from
    a first attempt that succeeded (its own standalone template code and its own output; the time is the
    batch's, marked by `batch_size`), or None where anything differs from that case (the agent wrote no
    template, the code failed, the output did not validate, the batch failed): the caller then runs the
    issue alone, which gives today's single-run behaviour, retries included.
    """
    codes: list[str] = []
    picked: list[int] = []
    for index, issue in enumerate(issues):
        try:
            code = agent.write_code(issue, profile=profile, attempts=[])
        except Exception:  # the single run meets the same failure and reports it
            continue
        # Only code the engine wrote; read after each write_code, as investigate_issue does.
        if code_source(agent) != "template" or not isinstance(code, str) or not code.strip():
            continue
        codes.append(code)
        picked.append(index)
    found: list[CodeInvestigation | None] = [None] * len(issues)
    if len(codes) < 2:
        return found
    columns = [needed_columns(issues[i]) for i in picked]
    try:
        runs = sandbox.run_batch(codes, data, columns=columns, timeout_s=timeout_s)
    except Exception:  # the sandbox adapter failed: each issue alone meets it and reports it
        return found
    for index, code, run in zip(picked, codes, runs, strict=True):
        checked = validate(run).model_copy(update={"attempts": 1, "source": "template"})
        if checked.success and checked.code == code:
            found[index] = checked
    return found


# Cells (rows x columns) from which investigations reading every row of every column run one at a time.
WHOLE_ROWS_ALONE = 40_000_000


def investigate_all(
    issues: list[Issue],
    *,
    agent: InvestigationAgent,
    sandbox: Sandbox,
    data: DatasetRef,
    profile: DatasetProfile,
    workers: int = 2,
    max_attempts: int = 3,
    timeout_s: float | None = None,
    on_done: Callable[[int, int, Issue], None] | None = None,
    batch: int = 0,
    reuse: Reuse | None = None,
) -> list[Issue]:
    """Investigate every supported issue, `workers` at a time, in the order given; never raises for one issue.

    Threads are enough to drive the local sandbox: each investigation runs in its own process.
    on_done(done, total, issue) is called as each investigation ends (for progress displays).
    batch: up to this many first-attempt template proofs share one sandbox process, when the sandbox can
    (`run_batch`; see `batch_size` for the values): whatever does not succeed there runs alone afterwards,
    so every outcome is the one a single run gives. 0 runs each alone.
    reuse: the script library's stored proofs (see investigate_issue).
    """
    finished = [0]
    lock = threading.Lock()
    # Issues whose proofs go through every column's every row (duplicate rows) on a long table take one at a
    # time: two at once were two sandbox processes of 1-1.5 GB each on 3M rows x 20 columns, the run's peak.
    alone = threading.Lock() if profile.rowCount * max(len(profile.columns), 1) >= WHOLE_ROWS_ALONE else None

    def heavy(members: list[Issue]) -> bool:
        return alone is not None and any(needed_columns(i) is None for i in members)

    def one(issue: Issue) -> Issue:
        with alone if alone is not None and heavy([issue]) else contextlib.nullcontext():
            result = _one(issue)
        return _done(result)

    def _done(result: Issue) -> Issue:
        if on_done is not None:
            with lock:
                finished[0] += 1
                on_done(finished[0], len(issues), result)
        return result

    def _one(issue: Issue) -> Issue:
        if not supports(issue, agent):
            return issue
        try:
            found = investigate_issue(
                issue,
                agent=agent,
                sandbox=sandbox,
                data=data,
                profile=profile,
                max_attempts=max_attempts,
                timeout_s=timeout_s,
                reuse=reuse,
            )
        except Exception as exc:  # the sandbox adapter itself failed: this issue only
            found = CodeInvestigation(
                code="",
                success=False,
                error=f"investigation failed: {type(exc).__name__}: {exc}",
                stopped="crash",
            )
        return confirm(issue, found)

    done: dict[int, Issue] = {}
    batches: list[list[int]] = []
    size = batch_size(batch)
    if size > 1 and callable(getattr(sandbox, "run_batch", None)):
        batchable = [
            i for i, issue in enumerate(issues) if supports(issue, agent) and template_first(agent, issue)
        ]
        batches = [
            [batchable[j] for j in b] for b in plan_batches([issues[i] for i in batchable], profile, size)
        ]

    def run_batch(members: list[int]) -> None:
        try:
            found = investigate_batch(
                [issues[i] for i in members],
                agent=agent,
                sandbox=sandbox,
                data=data,
                profile=profile,
                timeout_s=timeout_s,
            )
        except Exception:  # never the run: each issue of it runs alone
            return
        for index, investigation in zip(members, found, strict=True):
            if investigation is not None:
                done[index] = _done(confirm(issues[index], investigation))

    def unit(members: list[int]) -> None:
        if len(members) > 1:
            run_batch(members)
        else:
            done[members[0]] = one(issues[members[0]])

    # The likely longest first (whole-row issues, then columns with the most distinct values), so that no
    # long investigation is left running alone at the end; results come back in the order given. On the
    # 1M-row bench: 1.80-2.02 s against 2.02-2.13 s in the given order (three runs each). A batch counts
    # as the work of its issues. Then each issue a batch did not settle, alone.
    in_batch = {i for b in batches for i in b}
    units = [[i] for i in range(len(issues)) if i not in in_batch] + batches
    units.sort(key=lambda u: -sum(_expected_work(issues[i], profile) for i in u))
    # Each worker takes the next unit in that order, passing over one that must run alone while another such
    # runs (the other workers go on with the narrower ones meanwhile).
    pending, running_alone = list(units), [False]
    turn = threading.Condition()

    def must_wait(members: list[int]) -> bool:
        return running_alone[0] and heavy([issues[i] for i in members])

    def drain() -> None:
        while True:
            with turn:
                while pending and all(must_wait(u) for u in pending):
                    turn.wait()
                if not pending:
                    return
                members = pending.pop(next(k for k, u in enumerate(pending) if not must_wait(u)))
                big = heavy([issues[i] for i in members])
                running_alone[0] = running_alone[0] or big
            try:
                unit(members)
            finally:
                if big:
                    with turn:
                        running_alone[0] = False
                        turn.notify_all()

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="investigate") as pool:
        for drained in [pool.submit(drain) for _ in range(max(1, workers))]:
            drained.result()
        rest = [i for i in range(len(issues)) if i not in done]
        order = sorted(rest, key=lambda i: -_expected_work(issues[i], profile))
        done.update(zip(order, pool.map(one, [issues[i] for i in order]), strict=True))
    # A proof stopped on memory while others may have run beside it gets one more run, alone, once every other
    # has ended: where little memory is free, such a stop says more about what ran beside it than about the
    # proof (5M rows in a 1,792 MiB limit: the phone column's format proof stopped beside a whole-row proof,
    # and the report said "proof failed"). The second outcome is the one reported, whatever it is, with the
    # first run counted among its attempts. Only the engine's own templates: code an LLM wrote would be written
    # again, and paid for again, by a rerun.
    if workers > 1 and len(issues) > 1:
        for i in range(len(issues)):
            tried = done[i].investigation
            if (
                tried is not None
                and not tried.success
                and tried.stopped == "memory"
                and tried.source == "template"
            ):
                again = _one(issues[i])
                if again.investigation is not None:
                    attempts = tried.attempts + again.investigation.attempts
                    again = again.model_copy(
                        update={
                            "investigation": again.investigation.model_copy(update={"attempts": attempts})
                        }
                    )
                done[i] = again
    return [done[i] for i in range(len(issues))]


def _expected_work(issue: Issue, profile: DatasetProfile) -> int:
    """A rough size of an investigation: distinct values it goes through (all columns for whole rows)."""
    distinct = {c.name: c.distinct for c in profile.columns}
    names = [c for c in issue.affectedColumns if c in distinct]
    if issue.type in {"duplicate_rows", "near_duplicate_rows"} or not names:
        return sum(distinct.values())
    return sum(distinct[c] for c in names) + (profile.rowCount if issue.type == "dependency_violation" else 0)
