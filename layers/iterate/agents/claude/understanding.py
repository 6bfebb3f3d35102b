"""Claude understanding agent: the profile (never the raw file) → DatasetUnderstanding in business language."""

from __future__ import annotations

from pydantic import Field

from iterate.agents.claude.numbers import scrub
from iterate.agents.claude.render import profile_brief, tagged
from iterate.agents.offline.understanding import describe_column, observations
from iterate.contracts import Contract, DatasetProfile, DatasetSummary, DatasetUnderstanding
from iterate.contracts.understanding import ColumnSummary
from iterate.llm.session import CacheScope, LLMSession
from iterate.prompts import load

AGENT = "understanding"


class ColumnDescription(Contract):
    name: str
    description: str = Field(max_length=600)


class UnderstandingAnswer(Contract):
    """What the model may say; every number and every column list is taken from the profile instead."""

    description: str = Field(max_length=1200, description="what the dataset is about, for its business owner")
    observations: list[str] = Field(default_factory=list, max_length=8)
    columns: list[ColumnDescription]
    suggested_context: str = Field(max_length=1200, description="business context useful to analyse quality")


def user_message(profile: DatasetProfile, instructions: str | None) -> str:
    parts = [
        "Describe this dataset and each of its columns.",
        tagged("dataset_profile", profile_brief(profile)),
    ]
    if instructions:
        parts.append(tagged("user_instructions", instructions[:2000]))
    return "\n\n".join(parts)


class ClaudeUnderstandingAgent:
    def __init__(self, session: LLMSession) -> None:
        self.session = session
        self.prompt = load("understanding")

    def understand(self, profile: DatasetProfile, *, instructions: str | None = None) -> DatasetUnderstanding:
        answer = self.session.structured(
            agent=AGENT,
            prompt=self.prompt,
            user=user_message(profile, instructions),
            output=UnderstandingAnswer,
            tool_name="record_understanding",
            tool_description="Record the business description of the dataset and of every column.",
            max_tokens=min(8192, 1024 + 80 * profile.columnCount),
            scope=CacheScope(profile.contentHash, instructions),
        )
        return merge_understanding(profile, answer)


def merge_understanding(profile: DatasetProfile, answer: UnderstandingAnswer) -> DatasetUnderstanding:
    """Columns come from the profile (hallucinated ones are dropped, forgotten ones described offline);
    counts come from code."""
    described = {c.name: c.description.strip() for c in answer.columns if c.description.strip()}
    trusted = [profile.rowCount, profile.columnCount]
    for c in profile.columns:
        trusted += [c.missing, c.distinct, c.count]
    columns = [
        ColumnSummary(
            name=c.name,
            dataType=c.dataType,
            # Only the LLM's text is scrubbed of numbers code did not measure; the offline one is all code.
            description=(
                scrub(described[c.name], counts=trusted)
                if c.name in described
                else describe_column(c, profile)
            ),
            sampleValues=[v.value[:60] for v in c.topValues[:5]],
            semanticType=c.semanticType,
        )
        for c in profile.columns
    ]
    llm_observations = [scrub(o, counts=trusted) for o in answer.observations if o.strip()]
    return DatasetUnderstanding(
        summary=DatasetSummary(
            name=profile.name,
            description=scrub(answer.description, counts=trusted),
            rowCount=profile.rowCount,
            columnCount=profile.columnCount,
            observations=observations(profile) + llm_observations,
        ),
        columns=columns,
        suggested_context=scrub(answer.suggested_context, counts=trusted),
    )
