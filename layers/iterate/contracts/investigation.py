"""CodeInvestigation: code run in the sandbox to prove an issue, and what came back."""

from typing import Any, Literal

from pydantic import Field

from iterate.contracts.base import Contract

StopReason = Literal["policy", "timeout", "memory", "output_size", "crash", "error", "invalid_output"]


class ReusedScript(Contract):
    """Where a reused proof came from: a script an earlier run of the same dataset stored in the library."""

    scriptId: str = Field(description="the library entry (issue type, columns and rule, hashed)")
    storedAt: str = Field(description="when the run that wrote it stored it (ISO 8601, UTC)")
    runId: str = Field(description="the run whose investigation first proved the issue with this code")


class CodeInvestigation(Contract):
    code: str
    success: bool
    output: Any = None
    error: str | None = None
    execution_time_ms: float | None = None
    stopped: StopReason | None = Field(
        default=None, description="why the sandbox stopped the code, if it did"
    )
    attempts: int = Field(default=1, ge=1)
    source: Literal["template", "llm", "user"] = Field(
        default="template",
        description="who wrote the code: the engine's templates, an LLM, or a person (`iterate sandbox run`)",
    )
    printed: str | None = Field(
        default=None,
        description=(
            "what the code printed, when it also set `result` (so `result` is the output and the printed"
            " text is kept beside it); held to the output cap together with the output"
        ),
    )
    batch_size: int | None = Field(
        default=None,
        ge=1,
        description=(
            "set when this code ran with others (the engine's own templates) in one sandbox process of this"
            " many: execution_time_ms is then that whole process's, shared by all of them. The code alone is"
            " the same and runs on its own"
        ),
    )
    reused: ReusedScript | None = Field(
        default=None,
        description=(
            "set when this code came from the script library (a proof stored by an earlier run of the same"
            " dataset) instead of being written again: it ran in the sandbox and was checked like fresh code,"
            " and cost no LLM tokens"
        ),
    )
