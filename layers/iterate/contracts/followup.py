"""SmartFixFollowup: one multiple-choice question that guides a smart fix."""

from typing import Any

from pydantic import Field

from iterate.contracts.base import Contract


class SmartFixOption(Contract):
    key: str = Field(min_length=1, max_length=64)
    label: str = Field(min_length=1)


class FixAction(Contract):
    action: str = Field(description="e.g. standardize_values, set_null, drop_rows, keep, ask_next")
    parameters: dict[str, Any] = Field(default_factory=dict)


class SmartFixFollowup(Contract):
    prompt: str
    options: list[SmartFixOption] = Field(min_length=2, max_length=4)
    examples: str | None = None
    onResponse: dict[str, FixAction] | None = None


class FollowupTurn(Contract):
    """One question asked and, once answered, the key the user picked."""

    question: SmartFixFollowup
    answer: str | None = None
