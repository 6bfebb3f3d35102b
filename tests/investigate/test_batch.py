"""Template proofs batched into one sandbox process: the same outcome as one run each, and fallbacks."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from test_template_equivalence import issues_for

from iterate.agents import FallbackInvestigation, RunAgents, _Guard, _Lazy
from iterate.agents.offline.investigation import OfflineInvestigationAgent
from iterate.contracts import CodeInvestigation, DatasetProfile, DuplicateStats, Evidence, Issue
from iterate.detect import detect
from iterate.investigate import investigate_all
from iterate.investigate.loop import batch_size, plan_batches
from iterate.io import write_parquet_text
from iterate.issues import issues_from_findings
from iterate.ports import DatasetRef
from iterate.profile import profile_table
from iterate.sandbox import LocalSandbox, SandboxLimits
from iterate.settings import Settings
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit

ROWS = 240
WORDS = ["Paris", "Lyon", "Nice", "paris ", "LYON", "Lille", "N/A", ""]


def _columns(rng: random.Random) -> dict[str, list[str]]:
    """Twelve columns with planted problems: gaps, markers, bad formats, outliers, mixed types, repeats."""
    cols: dict[str, list[str]] = {}
    cols["id"] = [str(i) for i in range(ROWS)]
    cols["city"] = [
        rng.choice(WORDS[:3]) if rng.random() > 0.08 else rng.choice(WORDS[3:]) for _ in range(ROWS)
    ]
    cols["zip"] = [
        f"{rng.randint(10000, 99999)}" if rng.random() > 0.05 else rng.choice(["7500", "n/a", ""])
        for _ in range(ROWS)
    ]
    cols["amount"] = [
        f"{rng.gauss(100, 10):.2f}" if rng.random() > 0.04 else rng.choice(["99999", "$1,000", "abc"])
        for _ in range(ROWS)
    ]
    cols["when"] = [
        f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}"
        if rng.random() > 0.05
        else rng.choice(["03/01/2024", "", "soon"])
        for _ in range(ROWS)
    ]
    cols["flag"] = [
        rng.choice(["yes", "no"]) if rng.random() > 0.06 else rng.choice(["Yes", "YES ", "-", ""])
        for _ in range(ROWS)
    ]
    cols["code"] = [
        f"A{rng.randint(100, 999)}" if rng.random() > 0.05 else rng.choice(["a12", "A-1", "?"])
        for _ in range(ROWS)
    ]
    cols["score"] = [
        str(rng.randint(1, 10)) if rng.random() > 0.05 else rng.choice(["-1", "9999", "", "ten"])
        for _ in range(ROWS)
    ]
    cols["country"] = ["FR"] * ROWS
    cols["first"] = [rng.choice(["Ann", "Bob", "Cy", "Dee"]) for _ in range(ROWS)]
    cols["full__name"] = [f"{f} {rng.choice(['Lee', 'Jones'])}" for f in cols["first"]]
    cols["note"] = [rng.choice(["ok", "fine", "", "N/A", "null"]) for _ in range(ROWS)]
    for r in range(0, ROWS, 37):  # exact copies of a row
        for values in cols.values():
            values[r + 1 if r + 1 < ROWS else r] = values[r]
    return cols


@pytest.fixture(scope="module")
def table_and_issues(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DatasetProfile, list[Issue]]:
    rng = random.Random(7)
    cols = _columns(rng)
    table = Table.from_arrow(pa.table(cols), name="t", source=SourceInfo(path="t.csv", format="csv"))
    path = write_parquet_text(table, tmp_path_factory.mktemp("batch") / "data.parquet")
    profile = profile_table(table)
    found = issues_from_findings(detect(table).findings, table, None)
    # Plus one issue of every template on random columns and parameters: many disagree with the data
    # (unconfirmed) and some raise (the batch item fails, the issue runs alone, retries and all).
    extra: list[Issue] = []
    for k in range(4):
        for n, made in enumerate(issues_for(random.Random(k), list(cols))):
            extra.append(made.model_copy(update={"id": f"random-{k}-{n}"}))
    # And issues whose template fails: a column the table does not have (alone it sees the whole table)
    gone = [
        made.model_copy(
            update={
                "id": f"gone-{n}",
                "evidence": made.evidence.model_copy(update={"stats": {"column": "nope", "markers": [""]}}),
            }
        )  # type: ignore[union-attr]
        for n, made in enumerate(extra[:2])
    ]
    return path, profile, found + extra + gone


def _comparable(issue: Issue) -> dict[str, Any]:
    """The issue without what differs from one run to the next anyway (time) or says how it ran."""
    data = issue.model_dump(mode="json")
    if data.get("investigation"):
        data["investigation"].pop("execution_time_ms", None)
        data["investigation"].pop("batch_size", None)
    return data


def _investigate(
    path: Path, profile: DatasetProfile, issues: list[Issue], batch: int, **kw: Any
) -> list[Issue]:
    with LocalSandbox(SandboxLimits(timeout_s=kw.pop("timeout_s", 20))) as sandbox:
        return investigate_all(
            issues,
            agent=kw.pop("agent", OfflineInvestigationAgent()),
            sandbox=sandbox,
            data=DatasetRef(path=str(path)),
            profile=profile,
            batch=batch,
            **kw,
        )


def test_batch_on_and_off_give_identical_issues(
    table_and_issues: tuple[Path, DatasetProfile, list[Issue]],
) -> None:
    # Given a generated table with many detector issues of different types and random template issues
    path, profile, issues = table_and_issues
    types = {i.type for i in issues}
    assert len(issues) >= 60 and len(types) >= 8
    # When they are investigated one run each, in batches of the default size, and in small batches
    alone = _investigate(path, profile, issues, batch=0)
    batched = _investigate(path, profile, issues, batch=1)
    small = _investigate(path, profile, issues, batch=3)
    # Then every issue comes out the same: status, counts, evidence (examples), investigation and code
    assert [_comparable(i) for i in batched] == [_comparable(i) for i in alone]
    assert [_comparable(i) for i in small] == [_comparable(i) for i in alone]
    # And the batches did the work, marked as shared; what ran alone is not marked
    shared = [i for i in batched if i.investigation is not None and i.investigation.batch_size]
    assert len(shared) >= len(issues) // 2
    assert all(i.investigation.batch_size is None for i in alone if i.investigation is not None)
    statuses = {i.status for i in alone}
    assert {"confirmed", "unconfirmed"} <= statuses
    # Failed investigations (raised templates) are among them, and end the same, retries included
    failed = [i.id for i in alone if i.investigation is not None and not i.investigation.success]
    assert {"gone-0", "gone-1"} <= set(failed)
    for one, other in zip(alone, batched, strict=True):
        if one.id in failed:
            assert other.investigation is not None and other.investigation.batch_size is None


class CodeAgent:
    """Writes the code given per issue id; only ever templates (the class says so, like the offline agent)."""

    source = "template"

    def __init__(self, codes: dict[str, str]) -> None:
        self.codes = codes

    def supports(self, issue: Issue) -> bool:
        return True

    def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]) -> str:
        return self.codes[issue.id]


def detector_issue(issue_id: str, column: str, rows: int) -> Issue:
    return Issue(
        id=issue_id,
        type="missing_values",
        severity="low",
        description="d",
        affectedColumns=[column],
        suggestedAction="s",
        category="quick_fixes",
        affectedRows=rows,
        evidence=Evidence(affectedCells=rows, affectedRows=rows, affectedShare=0.1, stats={"column": column}),
    )


BLANKS = "result = {'affected_rows': int((df[%r] == '').sum())}"


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("raise ValueError('boom')", id="raises"),
        pytest.param("result = {'affected_rows': -1}", id="invalid-result"),
        pytest.param("result = [1, 2]", id="not-a-dict"),
        pytest.param("x = 1", id="no-result"),
        pytest.param("df['city'] = 'changed'\nresult = {'affected_rows': 0}", id="mutates-df"),
    ],
)
def test_an_item_that_fails_runs_alone_and_ends_as_alone(
    bad: str, table_and_issues: tuple[Path, DatasetProfile, list[Issue]]
) -> None:
    # Given five issues, one of which has code that fails (or that changes its own df)
    path, profile, _ = table_and_issues
    issues = [detector_issue(f"i{n}", c, 3) for n, c in enumerate(["city", "zip", "flag", "note"])]
    issues.insert(0, detector_issue("bad", "city", 0))  # runs first in its batch, on i0's column
    codes = {i.id: BLANKS % i.affectedColumns[0] for i in issues}
    codes["bad"] = bad
    agent = CodeAgent(codes)
    # When investigated in one batch and one run each
    batched = _investigate(path, profile, issues, batch=10, agent=agent)
    alone = _investigate(path, profile, issues, batch=0, agent=agent)
    # Then the outcome is the same for every issue; the others were proved in the batch, unaffected
    assert [_comparable(i) for i in batched] == [_comparable(i) for i in alone]
    by_id = {i.id: i for i in batched}
    for issue in issues:
        inv = by_id[issue.id].investigation
        assert inv is not None
        if issue.id != "bad":
            assert inv.success and inv.batch_size == 5, inv
    bad_inv = by_id["bad"].investigation
    assert bad_inv is not None
    if bad.startswith("df["):  # succeeds, alone or not; the next item still saw the original column
        assert bad_inv.success
    else:  # failed in the batch, then alone: the single-run verdict, attempts included
        assert not bad_inv.success and bad_inv.batch_size is None


def test_a_batch_that_times_out_falls_back_to_single_runs(
    table_and_issues: tuple[Path, DatasetProfile, list[Issue]],
) -> None:
    # Given a batch whose third item never ends
    path, profile, _ = table_and_issues
    issues = [detector_issue(f"i{n}", c, 3) for n, c in enumerate(["city", "zip", "flag", "note"])]
    codes = {i.id: BLANKS % i.affectedColumns[0] for i in issues}
    codes["i2"] = "while True:\n    pass"
    agent = CodeAgent(codes)
    # When investigated with batching (the batch gets the per-issue timeout) and without
    batched = _investigate(path, profile, issues, batch=10, agent=agent, timeout_s=2, max_attempts=1)
    alone = _investigate(path, profile, issues, batch=0, agent=agent, timeout_s=2, max_attempts=1)
    # Then every issue ran alone after the batch expired, with the single-run outcome
    assert [_comparable(i) for i in batched] == [_comparable(i) for i in alone]
    for issue in batched:
        assert issue.investigation is not None and issue.investigation.batch_size is None
    assert batched[2].investigation is not None and batched[2].investigation.stopped == "timeout"
    assert all(i.investigation.success for n, i in enumerate(batched) if n != 2)  # type: ignore[union-attr]


class SpySandbox:
    """A fake sandbox with run_batch: records which codes went through which door."""

    def __init__(self) -> None:
        self.single: list[str] = []
        self.batched: list[list[str]] = []

    @staticmethod
    def _answer(code: str) -> CodeInvestigation:
        if "fail" in code:
            return CodeInvestigation(code=code, success=False, error="boom", stopped="error")
        return CodeInvestigation(code=code, success=True, output={"affected_rows": 3})

    def run(self, code: str, data: DatasetRef, *, timeout_s: float | None = None) -> CodeInvestigation:
        self.single.append(code)
        return self._answer(code)

    def run_batch(
        self, codes: list[str], data: DatasetRef, *, columns: Any = None, timeout_s: float | None = None
    ) -> list[CodeInvestigation]:
        self.batched.append(list(codes))
        return [self._answer(c).model_copy(update={"batch_size": len(codes)}) for c in codes]


class LLMAgent:
    source = "llm"

    def supports(self, issue: Issue) -> bool:
        return True

    def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]) -> str:
        return f"# llm {issue.id} attempt {len(attempts) + 1}"


class Templates:
    """An offline twin: a template for the issues named, one that fails for those named fail-*."""

    source = "template"

    def supports(self, issue: Issue) -> bool:
        return not issue.id.startswith("no-template")

    def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]) -> str:
        return f"# template {issue.id}"


PROFILE = DatasetProfile(
    name="t",
    rowCount=10,
    columnCount=4,
    contentHash="h",
    nullMarker="",
    columns=[],
    duplicates=DuplicateStats(exactRows=0, exactGroups=0, nearRows=0),
)


def test_llm_code_and_retries_are_never_batched() -> None:
    # Given an agent whose code is an LLM's
    sandbox = SpySandbox()
    issues = [detector_issue(f"i{n}", "city", 3) for n in range(6)]
    out = investigate_all(
        issues, agent=LLMAgent(), sandbox=sandbox, data=DatasetRef(path="x"), profile=PROFILE, batch=1
    )
    # Then nothing went through run_batch
    assert sandbox.batched == [] and len(sandbox.single) == 6
    assert all(i.investigation is not None and i.investigation.source == "llm" for i in out)


def test_the_fallback_agent_batches_only_its_first_attempt_templates() -> None:
    # Given Claude with templates first: detector issues with a template (one of which fails), detector
    # issues without one, and the LLM's own hypotheses
    bundle = RunAgents(understanding=None, analysis=None, investigation=None, followup=None)  # type: ignore[arg-type]
    agent = FallbackInvestigation(LLMAgent(), _Lazy("x", "y", Templates()), _Guard(bundle, "investigation"))
    issues = [detector_issue(f"t{n}", "city", 3) for n in range(4)]
    issues += [detector_issue("fail-template", "zip", 3), detector_issue("no-template-1", "zip", 3)]
    issues += [detector_issue("hypo", "zip", 3).model_copy(update={"source": "llm", "status": "hypothesis"})]
    sandbox = SpySandbox()
    out = {
        i.id: i
        for i in investigate_all(
            issues, agent=agent, sandbox=sandbox, data=DatasetRef(path="x"), profile=PROFILE, batch=1
        )
    }
    # Then the batch held the first-attempt templates only
    assert len(sandbox.batched) == 1
    assert sorted(sandbox.batched[0]) == sorted(
        f"# template {i}" for i in ["t0", "t1", "t2", "t3", "fail-template"]
    )
    # And everything else ran alone: the failed template again (its single run), then Claude's retry
    assert "# template fail-template" in sandbox.single
    assert "# llm fail-template attempt 2" in sandbox.single
    assert "# llm no-template-1 attempt 1" in sandbox.single and "# llm hypo attempt 1" in sandbox.single
    assert not any("llm" in code for batch in sandbox.batched for code in batch)
    assert out["fail-template"].investigation.source == "llm"  # type: ignore[union-attr]
    assert out["t0"].investigation.source == "template" and out["t0"].investigation.batch_size == 5  # type: ignore[union-attr]


def test_the_fallback_agent_says_ahead_what_write_code_does() -> None:
    bundle = RunAgents(understanding=None, analysis=None, investigation=None, followup=None)  # type: ignore[arg-type]
    for prefer in (True, False):
        agent = FallbackInvestigation(
            LLMAgent(), _Lazy("x", "y", Templates()), _Guard(bundle, "investigation"), prefer_templates=prefer
        )
        for issue in [
            detector_issue("t", "a", 1),
            detector_issue("no-template", "a", 1),
            detector_issue("h", "a", 1).model_copy(update={"source": "llm"}),
        ]:
            ahead = agent.template_first(issue)
            agent.write_code(issue, profile=PROFILE, attempts=[])
            assert ahead == (agent.source == "template"), (prefer, issue.id)


def test_batches_group_by_columns_and_are_bounded() -> None:
    issues = [detector_issue(f"i{n}", f"c{n % 7}", 1) for n in range(30)]
    issues.append(issues[0].model_copy(update={"id": "rows", "type": "duplicate_rows"}))
    batches = plan_batches(issues, PROFILE, size=4, max_columns=3)
    seen = [i for b in batches for i in b]
    assert len(seen) == len(set(seen)) and 30 not in seen  # whole-row issues run alone
    for b in batches:
        assert 2 <= len(b) <= 4
        assert len({issues[i].affectedColumns[0] for i in b}) <= 3
    # A long table makes small batches: the cells the proofs read in all stay bounded (10 rows here)
    small = plan_batches(issues, PROFILE, size=40, max_columns=64, max_cells=25)
    assert small and all(len(b) == 2 for b in small)
    assert batch_size(0) == 0 and batch_size(1) > 1 and batch_size(7) == 7


def test_the_setting_reads_switches_and_sizes() -> None:
    assert Settings.from_env({}).investigation_batch == 1
    for raw, want in [("0", 0), ("off", 0), ("false", 0), ("1", 1), ("on", 1), ("25", 25)]:
        assert Settings.from_env({"ITERATE_INVESTIGATION_BATCH": raw}).investigation_batch == want
