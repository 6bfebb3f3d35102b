"""Accepted issues: a user's decision that an issue is known and may pass the gate, kept beside the data."""

from typing import Literal

from pydantic import Field

from iterate.contracts.base import Contract


class Acceptance(Contract):
    """One accepted issue, matched in later runs by type, columns and the values it covers (never by run ids)."""

    type: str = Field(description="the issue type, e.g. missing_values")
    columns: list[str] = Field(description="the issue's affected columns, in the issue's order")
    valueHashes: list[str] = Field(
        description="sha256 (first 16 hex digits) of each distinct flagged value when accepted, sorted: a later "
        "issue matches when every one of its values is among them, so new rows with the same values still "
        "match and a new kind of value does not (no data value is stored)"
    )
    cells: int = Field(ge=0, description="the issue's affected cells (rows when it flags none) when accepted")
    reason: str = Field(min_length=1, max_length=2000)
    by: str = Field(description="who accepted it")
    at: str = Field(description="when (ISO 8601, UTC)")
    issueId: str = Field(description="the issue's id when accepted, for people reading the file; not matched")
    id: str = Field(description="this acceptance's id (for the API's list and delete)")


class AcceptedFile(Contract):
    """`.iterate/accepted.json`: the accepted issues of the data files below the directory holding it."""

    version: Literal[1] = 1
    accepted: list[Acceptance] = Field(default_factory=list)


class AcceptedMark(Contract):
    """How an issue shown in a run is accepted: it is still reported, and never fails `--fail-on`."""

    reason: str
    by: str
    at: str
    acceptance: str = Field(description="the id of the acceptance that matched")
    cellsWhenAccepted: int = Field(ge=0)
    grown: bool = Field(description="the issue affects more cells than when it was accepted")
