"""The script library's rules: what is stored, what matches, when a stored proof runs, and how it is judged."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from iterate.contracts import (
    CodeInvestigation,
    ColumnProfile,
    DatasetProfile,
    DuplicateStats,
    Evidence,
    Issue,
    StoredScript,
)
from iterate.investigate import investigate_issue, stop_reason
from iterate.library import Shelf, columns_read, script_id, stored_entry
from iterate.library.local import LocalScriptLibrary
from iterate.ports import DatasetRef

pytestmark = pytest.mark.unit

DATA = DatasetRef(path="/nonexistent/data.parquet")
OWNER, DATASET = "alice", "/data/orders.csv"


def column(name: str, semantic: str = "text") -> ColumnProfile:
    return ColumnProfile(
        name=name,
        index=0,
        semanticType=semantic,
        dataType="string",
        count=10,
        missing=0,
        disguisedMissing=0,
        distinct=5,
        distinctRatio=0.5,
        uniqueRatio=0.1,
    )


def profile(**types: str) -> DatasetProfile:
    kinds = types or {"city": "categorical", "amount": "decimal", "notes": "text"}
    return DatasetProfile(
        name="orders",
        rowCount=10,
        columnCount=len(kinds),
        contentHash="h",
        nullMarker="",
        columns=[column(n, t) for n, t in kinds.items()],
        duplicates=DuplicateStats(exactRows=0, exactGroups=0, nearRows=0),
    )


def detector_issue(
    issue_id: str = "typos-city", *, rows: int = 3, cells: int = 3, col: str = "city"
) -> Issue:
    return Issue(
        id=issue_id,
        type="inconsistent_category",
        severity="low",
        description="d",
        affectedColumns=[col],
        suggestedAction="s",
        category="quick_fixes",
        affectedRows=rows,
        evidence=Evidence(
            affectedCells=cells,
            affectedRows=rows,
            affectedShare=min(rows / 10, 1.0),
            stats={"column": col, "rule": "rare"},
        ),
        detector="typos",
    )


def hypothesis(issue_id: str = "llm-1", col: str = "notes") -> Issue:
    return Issue(
        id=issue_id,
        type="business_rule",
        severity="low",
        description="h",
        affectedColumns=[col],
        suggestedAction="s",
        category="smart_fixes",
        source="llm",
        status="hypothesis",
    )


class Sandbox:
    """`#ok:ROWS:CELLS` succeeds with those counts, `#fail:MSG` fails (comments: valid Python the sandbox
    policy accepts, as stored code must be); records what ran."""

    def __init__(self, now: dict[str, str] | None = None) -> None:
        self.runs: list[str] = []
        self.now = now or {}  # what a code does on today's data, where that differs

    def run(self, code: str, data: DatasetRef, *, timeout_s: float | None = None) -> CodeInvestigation:
        self.runs.append(code)
        kind, _, rest = self.now.get(code, code).strip().lstrip("#").partition(":")
        if kind == "ok":
            rows, _, cells = rest.split()[0].partition(":")
            output: dict[str, Any] = {"affected_rows": int(rows)}
            if cells:
                output["affected_cells"] = int(cells)
            return CodeInvestigation(code=code, success=True, output=output, source="llm")
        return CodeInvestigation(code=code, success=False, error=rest, stopped="error", source="llm")


class Claude:
    """An LLM agent writing the codes given in turn; records the earlier attempts it was shown."""

    source = "llm"

    def __init__(self, *codes: str) -> None:
        self.codes = list(codes)
        self.seen: list[list[CodeInvestigation]] = []

    def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]) -> str:
        self.seen.append(list(attempts))
        return self.codes[min(len(self.seen) - 1, len(self.codes) - 1)]


class TemplateFirst(Claude):
    """Like FallbackInvestigation: a detector issue's first attempt is the engine's template."""

    def __init__(self, *codes: str) -> None:
        super().__init__(*codes)
        self._source = "llm"

    @property
    def source(self) -> str:  # type: ignore[override]
        return self._source

    def template_first(self, issue: Issue) -> bool:
        return issue.source == "detector"

    def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]) -> str:
        self._source = "template" if not attempts else "llm"
        return super().write_code(issue, profile=profile, attempts=attempts)


def proven(issue: Issue, code: str, *, status: str = "confirmed", source: str = "llm") -> Issue:
    rows = int(code.split(":")[1].split()[0])
    investigation = CodeInvestigation(
        code=code,
        success=True,
        output={"affected_rows": rows},
        source=source,  # type: ignore[arg-type]
    )
    return issue.model_copy(update={"investigation": investigation, "status": status})


def store(
    library: Any, issue: Issue, code: str, *, owner: str = OWNER, prof: DatasetProfile | None = None
) -> StoredScript:
    entry = stored_entry(
        proven(issue, code), prof or profile(), owner=owner, dataset_id=DATASET, run_id="r-first"
    )
    assert entry is not None
    library.save(entry, code)
    return entry


def shelf(library: Any, *, owner: str = OWNER, prof: DatasetProfile | None = None) -> Shelf:
    return Shelf(library, owner=owner, dataset_id=DATASET, profile=prof or profile())


@pytest.fixture
def library(tmp_path: Path) -> LocalScriptLibrary:
    return LocalScriptLibrary(tmp_path / "library")


# --- what is stored --------------------------------------------------------------------------------


def test_only_llm_written_proofs_are_stored_and_templates_are_not() -> None:
    prof = profile()
    kept = stored_entry(
        proven(detector_issue(), "#ok:3:3"), prof, owner=OWNER, dataset_id=DATASET, run_id="r"
    )
    assert kept is not None and kept.status == "confirmed" and kept.affectedRows == 3
    # The engine's template costs nothing to write again and follows the engine: not stored
    template = proven(detector_issue(), "#ok:3:3", source="template")
    assert stored_entry(template, prof, owner=OWNER, dataset_id=DATASET, run_id="r") is None
    # Code whose numbers disagreed, or that failed, proved nothing
    disagreed = proven(detector_issue(), "#ok:2:2", status="unconfirmed")
    assert stored_entry(disagreed, prof, owner=OWNER, dataset_id=DATASET, run_id="r") is None
    failed = detector_issue().model_copy(
        update={"investigation": CodeInvestigation(code="x", success=False, source="llm")}
    )
    assert stored_entry(failed, prof, owner=OWNER, dataset_id=DATASET, run_id="r") is None
    # A hypothesis measured by LLM code is the most such code can earn (unverified): kept, as unverified
    hyp = stored_entry(
        proven(hypothesis(), "#ok:4", status="unverified"), prof, owner=OWNER, dataset_id=DATASET, run_id="r"
    )
    assert hyp is not None and hyp.status == "unverified" and hyp.issueSource == "llm"


def test_an_entry_names_the_columns_its_code_reads_with_their_types() -> None:
    code = "x = df['city'].str.strip()\ny = df['amount']\nresult = {'affected_rows': 1}"
    assert columns_read(detector_issue(), code, profile()) == ["city", "amount"]
    entry = stored_entry(
        proven(detector_issue(), "#ok:3:3"), profile(), owner=OWNER, dataset_id=DATASET, run_id="r"
    )
    assert entry is not None and entry.columns == {"city": "text"}  # categorical and text are one kind


def test_a_script_id_is_what_the_issue_is_not_its_run_id_or_counts() -> None:
    a = detector_issue("typos-city", rows=3)
    b = detector_issue("some-other-id", rows=40, cells=41)
    assert script_id(a) == script_id(b)
    assert script_id(a) != script_id(detector_issue(col="notes"))
    assert script_id(a) != script_id(hypothesis(col="city"))
    ruled = a.model_copy(
        update={"evidence": a.evidence.model_copy(update={"stats": {"column": "city", "rule": "listed"}})}
    )  # type: ignore[union-attr]
    assert script_id(a) != script_id(ruled)


# --- when a stored proof runs ------------------------------------------------------------------------


def test_a_stored_proof_that_still_proves_its_issue_costs_no_agent_call(library: LocalScriptLibrary) -> None:
    # Given a proof stored by an earlier run of the dataset
    store(library, detector_issue(), "#ok:3:3")
    agent, sandbox = Claude("#ok:3:3 # fresh"), Sandbox()
    # When the same issue (another run's id) is investigated
    result = investigate_issue(
        detector_issue("typos-city-2"), agent=agent, sandbox=sandbox, data=DATA, profile=profile(),
        reuse=shelf(library),
    )  # fmt: skip
    # Then the stored code ran in the sandbox, the agent was never asked, and the proof says it was reused
    assert sandbox.runs == ["#ok:3:3"] and agent.seen == []
    assert result.success and result.source == "llm" and result.reused is not None
    assert result.reused.runId == "r-first" and result.attempts == 1


def test_a_stored_proof_that_no_longer_agrees_is_the_agents_starting_point(
    library: LocalScriptLibrary,
) -> None:
    # Given a stored proof that counts 3 rows, and new data where the detector finds 5
    store(library, detector_issue(), "#ok:3:3")
    agent, sandbox = Claude("#ok:5:5"), Sandbox()
    result = investigate_issue(
        detector_issue(rows=5, cells=5), agent=agent, sandbox=sandbox, data=DATA, profile=profile(),
        reuse=shelf(library), max_attempts=1,
    )  # fmt: skip
    # Then the stored code ran first, and the agent was shown it as a failed attempt, with why
    assert sandbox.runs == ["#ok:3:3", "#ok:5:5"]
    (shown,) = agent.seen
    (start,) = shown
    assert start.code == "#ok:3:3" and not start.success and start.reused is not None
    assert "no longer proves" in (start.error or "") and "3 affected rows" in (start.error or "")
    assert "5 rows" in (start.error or "")
    # And the agent's own proof is the result: the stored rerun did not use up its only attempt
    assert result.success and result.reused is None and result.attempts == 2
    assert stop_reason([start], 1) is None


@pytest.mark.parametrize(
    ("now", "why"),
    [("#fail:KeyError: 'notes'", "failed on this data: KeyError"), ("#ok:0", "at least one affected row")],
)
def test_a_stored_proof_that_fails_on_new_data_is_handed_over_with_why(
    library: LocalScriptLibrary, now: str, why: str
) -> None:
    # Given a hypothesis' stored code that now fails, or now finds nothing
    store(library, hypothesis(), "#ok:4")
    agent, sandbox = Claude("#ok:2"), Sandbox(now={"#ok:4": now})
    result = investigate_issue(
        hypothesis("llm-7"), agent=agent, sandbox=sandbox, data=DATA, profile=profile(), reuse=shelf(library)
    )
    # Then the agent starts from it, told why it no longer holds, and writes the proof
    ((start,),) = agent.seen
    assert start.code == "#ok:4" and not start.success and why in (start.error or "")
    assert result.success and result.reused is None and result.output == {"affected_rows": 2}


def test_the_free_template_goes_first_and_the_stored_proof_before_claude(library: LocalScriptLibrary) -> None:
    # Given a detector issue whose template failed in an earlier run, then Claude's code proved it
    store(library, detector_issue(), "#ok:3:3")
    # When the template fails again
    agent, sandbox = TemplateFirst("#fail:template broke", "#ok:3:3 # claude again"), Sandbox()
    result = investigate_issue(
        detector_issue(), agent=agent, sandbox=sandbox, data=DATA, profile=profile(), reuse=shelf(library)
    )
    # Then the template ran first, then the stored proof, and Claude was asked only for the template
    assert sandbox.runs == ["#fail:template broke", "#ok:3:3"]
    assert len(agent.seen) == 1 and result.reused is not None and result.attempts == 2


@pytest.mark.parametrize(
    "types",
    [
        {"amount": "decimal", "notes": "text"},  # the column is gone
        {"city": "integer", "amount": "decimal", "notes": "text"},  # it now holds another type
    ],
)
def test_no_stored_proof_where_its_columns_changed(
    library: LocalScriptLibrary, types: dict[str, str]
) -> None:
    store(library, detector_issue(), "#ok:3:3")
    agent, sandbox = Claude("#ok:3:3 # fresh"), Sandbox()
    investigate_issue(
        detector_issue(), agent=agent, sandbox=sandbox, data=DATA, profile=profile(**types),
        reuse=shelf(library, prof=profile(**types)),
    )  # fmt: skip
    assert sandbox.runs == ["#ok:3:3 # fresh"] and len(agent.seen) == 1


def test_a_stored_proof_is_offered_to_one_issue_of_a_run(library: LocalScriptLibrary) -> None:
    store(library, hypothesis(), "#ok:4")
    reuse = shelf(library)
    first = reuse.offer(hypothesis("llm-1"), [], Claude())
    assert first is not None and first[0] == "#ok:4"
    assert reuse.offer(hypothesis("llm-2"), [], Claude()) is None


# --- untrusted on reload -------------------------------------------------------------------------------


def test_one_owners_scripts_are_never_offered_to_another(library: LocalScriptLibrary) -> None:
    # Given bob's proof for a dataset at the same path
    store(library, detector_issue(), "#ok:3:3", owner="bob")
    # Then alice's run sees none of it, through the adapter or through the shelf
    assert library.entries("alice", DATASET) == []
    assert shelf(library, owner="alice").offer(detector_issue(), [], Claude()) is None
    assert shelf(library, owner="bob").offer(detector_issue(), [], Claude()) is not None

    class Leaky:  # an adapter that ignored the owner: the shelf still refuses what is not alice's
        def entries(self, owner: str, dataset_id: str) -> list[StoredScript]:
            return library.entries("bob", dataset_id)

        def code(self, entry: StoredScript) -> str | None:
            return library.code(entry)

        def save(self, entry: StoredScript, code: str) -> None:
            raise AssertionError

    assert (
        Shelf(Leaky(), owner="alice", dataset_id=DATASET, profile=profile()).offer(
            detector_issue(), [], Claude()
        )
        is None
    )


def test_stored_code_that_was_changed_is_never_run(library: LocalScriptLibrary) -> None:
    store(library, detector_issue(), "#ok:3:3")
    path = library.folder(OWNER, DATASET) / f"{script_id(detector_issue())}.py"
    path.write_text("#ok:3:3\nresult = {'affected_rows': 4}")
    assert shelf(library).offer(detector_issue(), [], Claude()) is None


def test_stored_code_the_sandbox_policy_refuses_is_never_run(library: LocalScriptLibrary) -> None:
    hostile = "import os\nresult = {'affected_rows': len(os.listdir('/'))}"
    entry = store(library, detector_issue(), "#ok:3:3")
    # Planted with a matching index entry (someone who can write the library)
    forged = entry.model_copy(update={"codeSha256": hashlib.sha256(hostile.encode()).hexdigest()})
    library.save(forged, hostile)
    assert shelf(library).offer(detector_issue(), [], Claude()) is None


@pytest.mark.skipif(os.name != "posix", reason="file ownership and modes")
def test_scripts_others_can_write_are_ignored(library: LocalScriptLibrary) -> None:
    store(library, detector_issue(), "#ok:3:3")
    folder = library.folder(OWNER, DATASET)
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert oct((folder / f"{script_id(detector_issue())}.py").stat().st_mode & 0o777) == "0o600"
    assert len(library.entries(OWNER, DATASET)) == 1
    folder.chmod(0o777)
    assert library.entries(OWNER, DATASET) == []


def test_an_unreadable_library_means_no_reuse_not_a_failed_run() -> None:
    class Down:
        def entries(self, owner: str, dataset_id: str) -> list[StoredScript]:
            raise OSError("disk gone")

        def code(self, entry: StoredScript) -> str | None:
            raise OSError

        def save(self, entry: StoredScript, code: str) -> None:
            raise OSError

    agent, sandbox = Claude("#ok:3:3"), Sandbox()
    result = investigate_issue(
        detector_issue(), agent=agent, sandbox=sandbox, data=DATA, profile=profile(),
        reuse=Shelf(Down(), owner=OWNER, dataset_id=DATASET, profile=profile()),
    )  # fmt: skip
    assert result.success and result.reused is None
