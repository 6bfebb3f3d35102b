"""The investigation loop with fake agents and sandboxes: retries with feedback, repeat detection, confirm."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from iterate.contracts import CodeInvestigation, DatasetProfile, DuplicateStats, Evidence, Issue
from iterate.investigate import (
    confirm,
    investigate_all,
    investigate_issue,
    next_code,
    stop_reason,
    validate,
)
from iterate.ports import DatasetRef

pytestmark = pytest.mark.unit

DATA = DatasetRef(path="/nonexistent/data.parquet")
PROFILE = DatasetProfile(
    name="t",
    rowCount=10,
    columnCount=2,
    contentHash="h",
    nullMarker="",
    columns=[],
    duplicates=DuplicateStats(exactRows=0, exactGroups=0, nearRows=0),
)


def make_issue(
    issue_id: str = "i1", *, rows: int | None = 3, type_: str = "missing_values", source: str = "detector"
) -> Issue:
    evidence = (
        Evidence(
            affectedCells=rows,
            affectedRows=rows,
            affectedShare=rows / 10,
            stats={"column": "a", "markers": [""]},
        )
        if rows is not None
        else None
    )
    return Issue(
        id=issue_id,
        type=type_,
        severity="medium",
        description="d",
        affectedColumns=["a"],
        suggestedAction="s",
        category="quick_fixes",
        affectedRows=rows,
        evidence=evidence,
        source=source,  # type: ignore[arg-type]
        status="confirmed" if source == "detector" else "hypothesis",
    )


class ScriptedAgent:
    """Writes the codes given in turn and records the feedback (earlier attempts) it was shown."""

    source = "llm"

    def __init__(self, codes: list[str]) -> None:
        self.codes = list(codes)
        self.seen: list[list[CodeInvestigation]] = []

    def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]) -> str:
        self.seen.append(list(attempts))
        return self.codes[min(len(self.seen) - 1, len(self.codes) - 1)]


class NamedProofs:
    """A template agent whose code names its issue (`ok:N#id`), so a sandbox can tell which proof it runs."""

    source = "template"

    def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]) -> str:
        return f"ok:{len(issue.id)}#{issue.id}"


class ScriptedSandbox:
    """Answers each code with a canned verdict: `ok:N` succeeds with N affected rows, `fail:MSG` fails."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.runs: list[str] = []
        self.delay_s = delay_s
        self.active = 0
        self.max_active = 0
        self.lock = threading.Lock()

    def run(self, code: str, data: DatasetRef, *, timeout_s: float | None = None) -> CodeInvestigation:
        with self.lock:
            self.runs.append(code)
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        time.sleep(self.delay_s)
        with self.lock:
            self.active -= 1
        kind, _, arg = code.partition(":")
        if kind == "ok":
            return CodeInvestigation(
                code=code, success=True, output={"affected_rows": int(arg), "share": 0.5}
            )
        if kind == "raw":
            return CodeInvestigation(code=code, success=True, output={"affected_rows": arg})
        if kind == "boom":
            raise RuntimeError("sandbox adapter broke")
        return CodeInvestigation(code=code, success=False, error=arg, stopped="error")


def test_fails_twice_then_succeeds_with_the_errors_fed_back() -> None:
    # Given an agent whose first two scripts fail with different errors
    agent = ScriptedAgent(["fail:KeyError a", "fail:TypeError b", "ok:3"])
    sandbox = ScriptedSandbox()
    # When the issue is investigated
    result = investigate_issue(make_issue(), agent=agent, sandbox=sandbox, data=DATA, profile=PROFILE)
    # Then the third attempt succeeds, and each retry saw the failures before it
    assert result.success and result.attempts == 3 and result.source == "llm"
    assert [len(s) for s in agent.seen] == [0, 1, 2]
    assert [a.error for a in agent.seen[2]] == ["KeyError a", "TypeError b"]


def test_the_source_is_read_after_each_attempt() -> None:
    # Given an agent whose first code comes from Claude and whose retry falls back to the template
    class Switching(ScriptedAgent):
        @property
        def source(self) -> str:  # type: ignore[override]
            return "llm" if len(self.seen) <= 1 else "template"

    agent = Switching(["fail:claude broke", "ok:3"])
    result = investigate_issue(
        make_issue(), agent=agent, sandbox=ScriptedSandbox(), data=DATA, profile=PROFILE
    )
    # Then the successful attempt is credited to the template that wrote it
    assert result.success and result.attempts == 2 and result.source == "template"


def test_the_same_code_again_stops_the_loop_without_running_it_twice() -> None:
    agent = ScriptedAgent(["fail:NameError x"])  # keeps writing the same code
    sandbox = ScriptedSandbox()
    result = investigate_issue(make_issue(), agent=agent, sandbox=sandbox, data=DATA, profile=PROFILE)
    assert sandbox.runs == ["fail:NameError x"]
    assert result.success is False and result.attempts == 1
    assert "repeated the same code" in (result.error or "")


def test_the_same_error_twice_stops_the_loop() -> None:
    agent = ScriptedAgent(["fail:same", "fail :same", "ok:1"])  # different code, same error
    sandbox = ScriptedSandbox()
    result = investigate_issue(make_issue(), agent=agent, sandbox=sandbox, data=DATA, profile=PROFILE)
    assert len(sandbox.runs) == 2
    assert result.success is False and result.attempts == 2
    assert "same error repeated" in (result.error or "")


def test_at_most_max_attempts() -> None:
    agent = ScriptedAgent(["fail:a", "fail:b", "fail:c", "ok:3"])
    sandbox = ScriptedSandbox()
    result = investigate_issue(
        make_issue(), agent=agent, sandbox=sandbox, data=DATA, profile=PROFILE, max_attempts=3
    )
    assert len(sandbox.runs) == 3 and result.attempts == 3 and not result.success
    assert "gave up after 3 attempts" in (result.error or "")


def test_an_agent_that_raises_ends_the_investigation_not_the_run() -> None:
    class Broken:
        def write_code(
            self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]
        ) -> str:
            raise TimeoutError("LLM did not answer")

    result = investigate_issue(
        make_issue(), agent=Broken(), sandbox=ScriptedSandbox(), data=DATA, profile=PROFILE
    )
    assert result.success is False and "LLM did not answer" in (result.error or "")


def test_next_code_is_the_step_function_form_of_the_loop() -> None:
    agent = ScriptedAgent(["fail:a", "fail:b"])
    issue = make_issue()
    first = next_code(issue, [], agent=agent, profile=PROFILE, max_attempts=2)
    assert first == "fail:a"
    done = [
        CodeInvestigation(code="fail:a", success=False, error="a"),
        CodeInvestigation(code="fail:b", success=False, error="b"),
    ]
    assert next_code(issue, done, agent=agent, profile=PROFILE, max_attempts=2) is None
    won = [CodeInvestigation(code="ok:1", success=True, output={"affected_rows": 1})]
    assert next_code(issue, won, agent=agent, profile=PROFILE) is None
    assert stop_reason(won, 3) == "succeeded"


@pytest.mark.parametrize(
    ("output", "ok"),
    [
        ({"affected_rows": 0}, True),
        ({"affected_rows": 12, "examples": []}, True),
        ({"affected_rows": True}, False),
        ({"affected_rows": -1}, False),
        ({"affected_rows": "3"}, False),
        ({"rows": 3}, False),
        ([1, 2], False),
    ],
)
def test_validate_requires_an_integer_affected_rows(output: Any, ok: bool) -> None:
    checked = validate(CodeInvestigation(code="c", success=True, output=output))
    assert checked.success is ok
    if not ok:
        assert checked.stopped == "invalid_output" and checked.error


def test_confirm_matches_the_detector_count() -> None:
    issue = make_issue(rows=3)
    same = confirm(issue, CodeInvestigation(code="c", success=True, output={"affected_rows": 3}))
    assert same.status == "confirmed" and same.investigation is not None
    assert same.evidence is not None and same.evidence.stats["investigation_affected_rows"] == 3
    other = confirm(issue, CodeInvestigation(code="c", success=True, output={"affected_rows": 5}))
    assert other.status == "unconfirmed"
    assert other.evidence is not None
    assert (
        other.evidence.stats["detector_affected_rows"] == 3
        and other.evidence.stats["investigation_affected_rows"] == 5
    )
    assert other.affectedRows == 3  # the detector's number stays; both are in the evidence


def test_a_failed_investigation_keeps_the_detector_evidence_and_says_why() -> None:
    issue = make_issue(rows=3)
    failed = confirm(
        issue, CodeInvestigation(code="c", success=False, error="timeout after 30 s", stopped="timeout")
    )
    assert failed.status == issue.status
    assert failed.affectedRows == 3 and failed.evidence is not None and failed.evidence.affectedRows == 3
    assert failed.evidence.stats["investigation_failed"] == "timeout after 30 s"


def test_an_llm_hypothesis_takes_its_numbers_from_the_code() -> None:
    hypothesis = make_issue(rows=None, type_="suspicious_prices", source="llm")
    output = {
        "affected_rows": 4,
        "affected_cells": 4,
        "share": 0.4,
        "examples": [{"row": 2, "column": "a", "value": "x"}, {"bad": 1}],
    }
    confirmed = confirm(hypothesis, CodeInvestigation(code="c", success=True, output=output, source="llm"))
    # LLM-written code with nothing to check it against: its numbers are kept, marked unverified
    assert confirmed.status == "unverified" and confirmed.affectedRows == 4
    assert confirmed.evidence is not None and confirmed.evidence.affectedShare == 0.4
    assert [e.row for e in confirmed.evidence.examples] == [2]
    empty = confirm(hypothesis, CodeInvestigation(code="c", success=True, output={"affected_rows": 0}))
    assert empty.status == "unconfirmed" and empty.affectedRows is None
    # A number the LLM wrote into its hypothesis is replaced by the code's, not compared with it
    guessed = hypothesis.model_copy(update={"affectedRows": 999})
    proven = confirm(guessed, CodeInvestigation(code="c", success=True, output=output, source="llm"))
    assert proven.status == "unverified" and proven.affectedRows == 4
    # The same numbers from engine code (a template) confirm it
    templated = confirm(
        hypothesis, CodeInvestigation(code="c", success=True, output=output, source="template")
    )
    assert templated.status == "confirmed"


def test_llm_code_on_a_detector_issue_is_confirmed_only_by_the_detectors_recount() -> None:
    issue = make_issue(rows=3)
    assert issue.evidence is not None
    cells = issue.evidence.affectedCells

    def run(output: dict) -> Issue:
        return confirm(issue, CodeInvestigation(code="c", success=True, output=output, source="llm"))

    assert run({"affected_rows": 3, "affected_cells": cells}).status == "confirmed"
    # rows agree, cells disagree: the code's numbers are not the detector's
    wrong_cells = run({"affected_rows": 3, "affected_cells": cells + 5})
    assert wrong_cells.status == "unconfirmed"
    assert wrong_cells.evidence is not None and wrong_cells.evidence.stats["detector_affected_cells"] == cells
    # rows agree, no cell count to check: not a proof
    assert run({"affected_rows": 3}).status == "unverified"
    # a fabricated count
    assert run({"affected_rows": 999, "affected_cells": cells}).status == "unconfirmed"


def test_investigate_all_is_bounded_ordered_and_never_raises() -> None:
    # Given six issues, one read-level, one whose sandbox call blows up, and a slow sandbox
    codes = {"a": "ok:3", "b": "fail:x", "c": "boom:", "d": "ok:3", "e": "ok:2"}

    class PerIssue:
        source = "template"

        def supports(self, issue: Issue) -> bool:
            return issue.id != "e"

        def write_code(
            self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]
        ) -> str:
            return codes[issue.id]

    issues = [make_issue(i) for i in "abcde"] + [make_issue("r", type_="ragged_rows")]
    sandbox = ScriptedSandbox(delay_s=0.05)
    # When they are investigated two at a time
    out = investigate_all(issues, agent=PerIssue(), sandbox=sandbox, data=DATA, profile=PROFILE, workers=2)
    # Then the order is kept, at most two ran at once, and each issue got what it deserved
    assert [i.id for i in out] == ["a", "b", "c", "d", "e", "r"]
    assert sandbox.max_active <= 2
    by_id = {i.id: i for i in out}
    assert by_id["a"].status == "confirmed" and by_id["a"].investigation is not None
    assert by_id["a"].investigation.source == "template"
    assert by_id["b"].investigation is not None and not by_id["b"].investigation.success
    assert by_id["c"].investigation is not None and by_id["c"].investigation.stopped == "crash"
    assert "sandbox adapter broke" in (by_id["c"].investigation.error or "")
    assert by_id["e"].investigation is None and by_id["r"].investigation is None


def test_investigate_all_starts_the_biggest_first_and_answers_in_order() -> None:
    from iterate.contracts.profile import ColumnProfile

    def column(name: str, distinct: int) -> ColumnProfile:
        return ColumnProfile.model_construct(name=name, distinct=distinct)

    profile = PROFILE.model_copy(
        update={"columns": [column("small", 3), column("big", 900), column("mid", 40)]}
    )

    def on(col: str, issue_id: str, type_: str = "missing_values") -> Issue:
        return make_issue(issue_id, type_=type_).model_copy(update={"affectedColumns": [col]})

    issues = [on("small", "s"), on("mid", "m"), on("big", "b"), on("small", "d", "duplicate_rows")]

    sandbox = ScriptedSandbox()
    out = investigate_all(issues, agent=NamedProofs(), sandbox=sandbox, data=DATA, profile=profile, workers=1)
    # Whole-row issues, then the columns with the most distinct values; the answers keep the given order
    assert [code.split("#")[1] for code in sandbox.runs] == ["d", "b", "m", "s"]
    assert [i.id for i in out] == ["s", "m", "b", "d"]


class WholeRowsSandbox(ScriptedSandbox):
    """Also records how many proofs of whole-row issues (`#dup...`) ran at once, and what ran beside one."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(delay_s)
        self.whole = 0
        self.max_whole = 0
        self.beside_whole: set[str] = set()

    def run(self, code: str, data: DatasetRef, *, timeout_s: float | None = None) -> CodeInvestigation:
        name = code.split("#")[1]
        with self.lock:
            if name.startswith("dup"):
                self.whole += 1
                self.max_whole = max(self.max_whole, self.whole)
            elif self.whole:
                self.beside_whole.add(name)
        try:
            return super().run(code, data, timeout_s=timeout_s)
        finally:
            with self.lock:
                self.whole -= name.startswith("dup")


@pytest.mark.parametrize("long_table", [True, False])
def test_whole_row_proofs_of_a_long_table_run_one_at_a_time(monkeypatch, long_table: bool) -> None:
    import iterate.investigate.loop as loop

    # Given two whole-row issues and three column issues, on a table past (or short of) the size at which
    # whole-row proofs take turns
    monkeypatch.setattr(loop, "WHOLE_ROWS_ALONE", 10 if long_table else 10**9)
    issues = [make_issue(f"col{k}") for k in range(3)]
    issues += [make_issue("dup1", type_="duplicate_rows"), make_issue("dup2", type_="near_duplicate_rows")]

    from iterate.contracts.profile import ColumnProfile

    columns = [ColumnProfile.model_construct(name=n, distinct=5) for n in "ab"]
    profile = PROFILE.model_copy(update={"columns": columns})  # whole rows first: 10 values against 5
    sandbox = WholeRowsSandbox(delay_s=0.2)
    out = investigate_all(issues, agent=NamedProofs(), sandbox=sandbox, data=DATA, profile=profile, workers=2)
    # Then every issue is answered in order; on the long table the whole-row proofs never overlap, and the
    # other worker went on with column issues meanwhile
    assert [i.id for i in out] == ["col0", "col1", "col2", "dup1", "dup2"]
    assert len(sandbox.runs) == 5 and sandbox.max_active == 2
    if long_table:
        assert sandbox.max_whole == 1 and sandbox.beside_whole
    else:
        assert sandbox.max_whole == 2  # both whole-row proofs start first, side by side


class CrowdedSandbox(ScriptedSandbox):
    """Stops the proof named `big` on memory whenever another proof runs beside it (as a machine with little
    memory free would), and records how many ran at once each time it started."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(delay_s)
        self.big_beside: list[int] = []

    def run(self, code: str, data: DatasetRef, *, timeout_s: float | None = None) -> CodeInvestigation:
        if code.split("#")[1] != "big":
            return super().run(code, data, timeout_s=timeout_s)
        time.sleep(self.delay_s / 2)  # the others have started
        with self.lock:
            self.runs.append(code)
            self.big_beside.append(self.active)
            crowded = self.active > 0
        if crowded:
            return CodeInvestigation(
                code=code, success=False, error="past the memory budget", stopped="memory"
            )
        return CodeInvestigation(code=code, success=True, output={"affected_rows": 3, "share": 0.3})


@pytest.mark.parametrize("workers", [1, 2])
def test_a_proof_stopped_on_memory_beside_others_runs_again_alone(workers: int) -> None:
    # Given a proof that runs out of memory whenever another proof runs beside it
    issues = [make_issue("big")] + [make_issue(f"c{k}") for k in range(3)]
    sandbox = CrowdedSandbox(delay_s=0.2)
    out = investigate_all(
        issues, agent=NamedProofs(), sandbox=sandbox, data=DATA, profile=PROFILE, workers=workers
    )
    big = out[0]
    assert big.investigation is not None
    if workers == 2:
        # Then, after the others, it ran again with nothing beside it, and that run is the one reported
        assert sandbox.big_beside[0] > 0 and sandbox.big_beside[-1] == 0 and len(sandbox.big_beside) == 2
        assert big.investigation.success and big.status == "confirmed"
        assert big.investigation.attempts == 2  # the run stopped beside the others counts
        assert "investigation_failed" not in (big.evidence.stats if big.evidence else {})
    else:
        # One at a time it never had company: it ran once
        assert sandbox.big_beside == [0] and big.investigation.success and big.investigation.attempts == 1
    assert [i.id for i in out] == ["big", "c0", "c1", "c2"]
    assert all(i.investigation is not None for i in out)


def test_a_proof_stopped_on_memory_alone_is_reported_after_one_more_run() -> None:
    # Given a proof that always runs out of memory
    class AlwaysOut(ScriptedSandbox):
        def run(self, code: str, data: DatasetRef, *, timeout_s: float | None = None) -> CodeInvestigation:
            if code.split("#")[1] == "big":
                with self.lock:
                    self.runs.append(code)
                return CodeInvestigation(code=code, success=False, error="past the budget", stopped="memory")
            return super().run(code, data, timeout_s=timeout_s)

    sandbox = AlwaysOut()
    out = investigate_all(
        [make_issue("big"), make_issue("c0")],
        agent=NamedProofs(),
        sandbox=sandbox,
        data=DATA,
        profile=PROFILE,
    )
    # Then it ran twice (once more, alone), and the failure is reported with its reason
    assert sum(code.endswith("#big") for code in sandbox.runs) == 2
    assert out[0].investigation is not None and out[0].investigation.stopped == "memory"
    assert out[0].evidence is not None
    assert out[0].evidence.stats["investigation_failed"].startswith("past the budget")


def test_code_an_llm_wrote_is_not_rerun_after_a_memory_stop() -> None:
    # Given LLM-written code that runs out of memory beside another proof
    class Crowded(ScriptedSandbox):
        def run(self, code: str, data: DatasetRef, *, timeout_s: float | None = None) -> CodeInvestigation:
            with self.lock:
                self.runs.append(code)
            return CodeInvestigation(code=code, success=False, error="past the budget", stopped="memory")

    agent = ScriptedAgent(["big = 1"])
    sandbox = Crowded()
    out = investigate_all(
        [make_issue("big"), make_issue("c0")],
        agent=agent,
        sandbox=sandbox,
        data=DATA,
        profile=PROFILE,
        workers=2,
    )
    # Then no second loop (and no second bill) follows: each issue's code ran in its own loop only
    assert len(agent.seen) == 4  # two writes per issue (the second repeats the first and ends its loop)
    assert all(i.investigation is not None and i.investigation.stopped == "memory" for i in out)
