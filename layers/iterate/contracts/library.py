"""StoredScript: one proof in the script library, what a later run of the same dataset may rerun."""

from typing import Literal

from pydantic import Field

from iterate.contracts.base import SCHEMA_VERSION, Contract


class StoredScript(Contract):
    """The index entry of a stored investigation script; its code is kept beside it (a file, an S3 object)."""

    schemaVersion: str = SCHEMA_VERSION
    scriptId: str = Field(description="hash of what the script proves: issue type, detector, rule, columns")
    owner: str = Field(description="whose data it ran on: it is never offered to another owner")
    datasetId: str = Field(description="the dataset (on AWS its id, locally the input's resolved path)")
    issueType: str
    issueSource: Literal["detector", "llm"]
    detector: str | None = None
    rule: str | None = Field(default=None, description="the detector's rule, when it names one")
    columns: dict[str, str] = Field(
        description="the columns the script reads (the issue's and those its code names) and their types"
    )
    schemaFingerprint: str = Field(description="hash of every column's name and type when it was stored")
    codeSha256: str = Field(description="the stored code's hash: code that does not match is never run")
    source: Literal["template", "llm"] = "llm"
    status: Literal["confirmed", "unverified"] = Field(
        description="what the proof earned: confirmed by an engine recount, or unverified (nothing to recount)"
    )
    affectedRows: int = Field(ge=0, description="what it counted when it was stored")
    issueId: str = Field(description="the issue it proved (informative: matching never uses run ids)")
    runId: str
    storedAt: str = Field(description="ISO 8601, UTC")
    engineVersion: str
