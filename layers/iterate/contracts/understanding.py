"""DatasetUnderstanding: the business description of a dataset (field names kept from the original design)."""

from pydantic import Field

from iterate.contracts.base import SCHEMA_VERSION, Contract


class DatasetSummary(Contract):
    name: str
    description: str
    rowCount: int = Field(ge=0)
    columnCount: int = Field(ge=0)
    observations: list[str] = Field(default_factory=list)


class ColumnSummary(Contract):
    name: str
    dataType: str = Field(description="string|numeric|date|categorical|boolean (coarse, for clients)")
    description: str
    sampleValues: list[str] = Field(default_factory=list)
    semanticType: str | None = Field(
        default=None, description="the profiler's finer type, e.g. email, currency"
    )


class DatasetUnderstanding(Contract):
    schemaVersion: str = SCHEMA_VERSION
    summary: DatasetSummary
    columns: list[ColumnSummary]
    suggested_context: str
