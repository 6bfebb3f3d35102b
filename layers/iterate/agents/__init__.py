"""The agents a run uses: Claude when a key is set, each step falling back to its offline twin on any failure."""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from iterate.contracts import (
    CodeInvestigation,
    DatasetProfile,
    DatasetUnderstanding,
    FixAction,
    FollowupTurn,
    Issue,
    SmartFixFollowup,
    TokenUsage,
)
from iterate.llm.errors import LLMError
from iterate.ports import (
    Agents,
    AnalysisAgent,
    AnalysisDraft,
    FollowupAgent,
    InvestigationAgent,
    UnderstandingAgent,
)
from iterate.settings import Settings

log = logging.getLogger("iterate.agents")
T = TypeVar("T")


@dataclass
class RunAgents(Agents):
    """Agents plus what the report needs about them: the model, token usage, and how each step went."""

    model: str | None = None
    usage_source: Callable[[], dict[str, TokenUsage]] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def usage(self) -> dict[str, TokenUsage]:
        """Token usage per agent plus "total" (empty offline)."""
        return self.usage_source() if self.usage_source else {"total": TokenUsage()}

    def fell_back(self, step: str, exc: BaseException) -> None:
        reason = getattr(exc, "reason", "unexpected_error")
        line = f"{step}: {reason} ({type(exc).__name__}: {str(exc)[:200]})"
        with self._lock:
            self.mode = "degraded"
            if line not in self.degraded_reasons:  # an outage repeats itself for every investigation
                self.degraded_reasons.append(line)


class _Guard:
    """Runs the Claude call; any failure (after the adapter's retries) runs the offline twin instead."""

    def __init__(self, bundle: RunAgents, step: str) -> None:
        self.bundle = bundle
        self.step = step

    def __call__(self, primary: Callable[[], T], fallback: Callable[[], T]) -> T:
        try:
            return primary()
        except Exception as exc:  # LLM down, slow, rate-limited or talking nonsense: never fail the run
            log.warning(
                "llm step fell back to offline",
                extra={"step": self.step, "error": type(exc).__name__},
                exc_info=not isinstance(exc, LLMError),  # anything but an LLM error is a bug worth a trace
            )
            self.bundle.fell_back(self.step, exc)
            return fallback()


class _Lazy:
    """An offline twin imported on first use: an LLM Lambda that never falls back never loads it."""

    def __init__(self, module: str, name: str, instance: Any = None) -> None:
        self.module, self.name, self._instance = module, name, instance

    def get(self) -> Any:
        if self._instance is None:
            self._instance = getattr(importlib.import_module(self.module), self.name)()
        return self._instance


class FallbackUnderstanding:
    def __init__(self, primary: UnderstandingAgent, offline: _Lazy, guard: _Guard) -> None:
        self.primary, self.offline, self.guard = primary, offline, guard

    def understand(self, profile: DatasetProfile, *, instructions: str | None = None) -> DatasetUnderstanding:
        return self.guard(
            lambda: self.primary.understand(profile, instructions=instructions),
            lambda: self.offline.get().understand(profile, instructions=instructions),
        )


class FallbackAnalysis:
    def __init__(self, primary: AnalysisAgent, offline: _Lazy, guard: _Guard) -> None:
        self.primary, self.offline, self.guard = primary, offline, guard

    def analyze(
        self,
        candidates: list[Issue],
        *,
        profile: DatasetProfile,
        understanding: DatasetUnderstanding,
        instructions: str | None = None,
        previous_issues: list[Issue] | None = None,
    ) -> AnalysisDraft:
        kwargs: dict[str, Any] = {
            "profile": profile,
            "understanding": understanding,
            "instructions": instructions,
            "previous_issues": previous_issues,
        }
        return self.guard(
            lambda: self.primary.analyze(candidates, **kwargs),
            lambda: self.offline.get().analyze(candidates, **kwargs),
        )


class FallbackInvestigation:
    """Detector issues start from their exact, free template; Claude writes code for its own hypotheses and
    revises any attempt that failed (the ReAct step). Claude failing falls back to the template."""

    def __init__(
        self, primary: InvestigationAgent, offline: _Lazy, guard: _Guard, *, prefer_templates: bool = True
    ) -> None:
        self.primary, self.offline, self.guard = primary, offline, guard
        self.prefer_templates = prefer_templates
        self._last = threading.local()

    @property
    def source(self) -> str:
        """Who wrote the code this thread got last ("template" or "llm"): read it after each write_code."""
        return str(getattr(self._last, "source", "llm"))

    def supports(self, issue: Issue) -> bool:
        """Claude can write code for any issue type, hypotheses included."""
        return True

    def _template_fits(self, issue: Issue) -> bool:
        check = getattr(self.offline.get(), "supports", None)
        return bool(check(issue)) if callable(check) else False

    def template_first(self, issue: Issue) -> bool:
        """Whether the first attempt for this issue is its template (what write_code decides, asked ahead:
        the investigation loop runs such trusted proofs several to one sandbox process)."""
        return self.prefer_templates and issue.source == "detector" and self._template_fits(issue)

    def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]) -> str:
        if not attempts and self.template_first(issue):
            self._last.source = "template"
            return str(self.offline.get().write_code(issue, profile=profile, attempts=attempts))

        def claude() -> str:
            code = self.primary.write_code(issue, profile=profile, attempts=attempts)
            self._last.source = "llm"
            return code

        def template() -> str:
            self._last.source = "template"
            return str(self.offline.get().write_code(issue, profile=profile, attempts=attempts))

        return self.guard(claude, template)


class FallbackFollowup:
    def __init__(self, primary: FollowupAgent, offline: _Lazy, guard: _Guard) -> None:
        self.primary, self.offline, self.guard = primary, offline, guard

    def next_question(self, issue: Issue, history: list[FollowupTurn]) -> SmartFixFollowup:
        return self.guard(
            lambda: self.primary.next_question(issue, history),
            lambda: self.offline.get().next_question(issue, history),
        )


OFFLINE = {
    "understanding": ("iterate.agents.offline.understanding", "OfflineUnderstandingAgent"),
    "analysis": ("iterate.agents.offline.analysis", "OfflineAnalysisAgent"),
    "investigation": ("iterate.agents.offline.investigation", "OfflineInvestigationAgent"),
    "followup": ("iterate.agents.offline.followup", "OfflineFollowupAgent"),
}


def _twins(offline: Agents | None) -> dict[str, _Lazy]:
    return {
        step: _Lazy(module, name, getattr(offline, step) if offline is not None else None)
        for step, (module, name) in OFFLINE.items()
    }


def build_agents(
    settings: Settings,
    *,
    llm: Any = None,
    cache_dir: str | Path | None = None,
    observers: Iterable[Any] = (),
    offline: Agents | None = None,
    prefer_templates: bool = True,
    deadline_s: float | None = None,
    cache: Any = None,
    llm_gate: Any = None,
) -> RunAgents:
    """Offline agents when there is no key and no injected `llm`; otherwise Claude agents, each guarded so a
    failure falls back to its offline twin for that call and marks the run degraded.

    llm: an `iterate.llm.LLM` (tests inject an AnthropicLLM pointed at a fake server, or any fake).
    cache_dir: where answers are cached by dataset content, agent, prompt version and instructions
        (default: in memory, for the life of this process).
    observers: `iterate.llm.observers.Observer`s (structured logs, metrics).
    offline: the offline twins (default: the engine's offline agents, imported when first needed).
    prefer_templates: a detector issue's first investigation uses its template (exact and free); Claude
        writes code for hypotheses and for every retry after a failed attempt. False: Claude writes all.
    cache: an `iterate.llm.cache.ResponseCache` instead of cache_dir, e.g. StoreCache(s3_store) on AWS so
        that every function of every run shares answers.
    llm_gate: called with a call's most tokens before it is made (AnthropicLLM's `gate`: the deployment's
        token bucket on AWS); ignored when `llm` is given.
    deadline_s: seconds one agent call may take in all (retries and repair turn included) before it falls
        back; keep it below the function's timeout (default 2.5 x settings.llm_timeout_s). Behind API
        Gateway (29 s) pass about 20.
    """
    twins = _twins(offline)
    if llm is None and not settings.anthropic_api_key:
        return RunAgents(
            understanding=twins["understanding"].get(),
            analysis=twins["analysis"].get(),
            investigation=twins["investigation"].get(),
            followup=twins["followup"].get(),
            mode="offline",
        )
    from iterate.agents.claude import (
        ClaudeAnalysisAgent,
        ClaudeFollowupAgent,
        ClaudeInvestigationAgent,
        ClaudeUnderstandingAgent,
    )
    from iterate.llm.cache import DirectoryCache, MemoryCache
    from iterate.llm.observers import LoggingObserver, Observers
    from iterate.llm.session import LLMSession

    # Structured logs by default; callers with a Powertools logger or metrics pass their own observers.
    hooks = Observers(list(observers) or [LoggingObserver()])
    if llm is None:
        from iterate.llm.anthropic import AnthropicLLM

        llm = AnthropicLLM(
            api_key=settings.anthropic_api_key or "",
            model=settings.model,
            base_url=settings.anthropic_base_url,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            observers=hooks,
            gate=llm_gate,
        )
    if cache is None:
        cache = DirectoryCache(cache_dir) if cache_dir is not None else MemoryCache()
    budget = deadline_s if deadline_s is not None else 2.5 * settings.llm_timeout_s
    session = LLMSession(llm, cache=cache, observers=hooks, call_budget_s=budget)
    understanding = ClaudeUnderstandingAgent(session)
    analysis = ClaudeAnalysisAgent(session)
    investigation = ClaudeInvestigationAgent(session, static_policy=settings.sandbox_inprocess_checks)
    followup = ClaudeFollowupAgent(session)
    bundle = RunAgents(
        understanding=understanding,
        analysis=analysis,
        investigation=investigation,
        followup=followup,
        mode="llm",
        model=llm.model,
        usage_source=session.meter.snapshot,
    )
    bundle.understanding = FallbackUnderstanding(
        understanding, twins["understanding"], _Guard(bundle, "understanding")
    )
    bundle.analysis = FallbackAnalysis(analysis, twins["analysis"], _Guard(bundle, "analysis"))
    bundle.investigation = FallbackInvestigation(
        investigation,
        twins["investigation"],
        _Guard(bundle, "investigation"),
        prefer_templates=prefer_templates,
    )
    bundle.followup = FallbackFollowup(followup, twins["followup"], _Guard(bundle, "followup"))
    return bundle


class FollowupError(ValueError):
    """The answer does not fit the conversation (no pending question, or not one of its option keys)."""


@dataclass
class FollowupStep:
    """Where a follow-up conversation stands: the question to show, or the fix action it ended with."""

    history: list[FollowupTurn]
    question: SmartFixFollowup | None = None
    action: FixAction | None = None


def _terminal(history: list[FollowupTurn]) -> FixAction | None:
    if not history or history[-1].answer is None:
        return None
    last = history[-1]
    action = (last.question.onResponse or {}).get(last.answer or "") or FixAction(action="keep")
    return None if action.action == "ask_next" else action


def followup(
    agent: FollowupAgent, issue: Issue, history: list[FollowupTurn], answer: str | None = None
) -> FollowupStep:
    """One step of the follow-up conversation (the engine function behind the CLI and the API).

    Without `answer`: the pending question (asked now if there is none), or the action the conversation
    ended with. With `answer`: records it for the pending question and returns the next question, or the
    resulting fix action. From a cold start the first question is asked and answered at once; once the
    conversation has ended, an answer replaces the last one (or, when it is not one of the last question's
    options but one of the first's, starts the conversation again with it). Raises FollowupError for an
    answer that is not one of the options.
    """
    turns = list(history)
    if answer is None:
        done = _terminal(turns)
        if done is not None:
            return FollowupStep(turns, action=done)
        if turns and turns[-1].answer is None:
            return FollowupStep(turns, question=turns[-1].question)
        question = agent.next_question(issue, turns)
        return FollowupStep([*turns, FollowupTurn(question=question)], question=question)
    if not turns:
        turns = [FollowupTurn(question=agent.next_question(issue, []))]
    elif turns[-1].answer is not None:  # ended: change the last answer, or start again from the first
        last_keys = {o.key for o in turns[-1].question.options}
        first_keys = {o.key for o in turns[0].question.options}
        if answer in last_keys or answer not in first_keys:
            turns[-1] = FollowupTurn(question=turns[-1].question)
        else:
            turns = [FollowupTurn(question=turns[0].question)]
    pending = turns[-1].question
    keys = [o.key for o in pending.options]
    if answer not in keys:
        raise FollowupError(f"answer must be one of: {', '.join(keys)}")
    turns[-1] = FollowupTurn(question=pending, answer=answer)
    done = _terminal(turns)
    if done is not None:
        return FollowupStep(turns, action=done)
    question = agent.next_question(issue, turns)
    return FollowupStep([*turns, FollowupTurn(question=question)], question=question)
