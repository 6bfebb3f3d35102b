"""DatasetProfile: statistics of every column and of the dataset, computed without an LLM."""

from typing import Literal

from pydantic import Field

from iterate.contracts.base import SCHEMA_VERSION, Contract


class ValueCount(Contract):
    value: str
    count: int


class Histogram(Contract):
    """Rows per equal-width bin between robust bounds (0.5th and 99.5th percentiles); the tails counted apart."""

    edges: list[float] = Field(description="bin edges, len(counts) + 1")
    counts: list[int]
    below: int = Field(default=0, description="rows under the first edge")
    above: int = Field(default=0, description="rows over the last edge")


class NumericStats(Contract):
    count: int
    min: float
    max: float
    mean: float
    std: float
    median: float
    mad: float = Field(description="median absolute deviation")
    q1: float
    q3: float
    histogram: Histogram | None = None


class DateStats(Contract):
    count: int
    min: str
    max: str
    formats: list[ValueCount] = Field(default_factory=list)
    median: str | None = None
    q1: str | None = None
    q3: str | None = None


class LengthStats(Contract):
    min: int
    max: int
    mean: float


class ColumnProfile(Contract):
    name: str
    index: int
    semanticType: str = Field(
        description="integer, decimal, boolean, date, datetime, categorical, text, "
        "identifier, email, phone, postal_code, url, quantity, currency, percent, empty"
    )
    dataType: str = Field(description="coarse type for clients: string|numeric|date|categorical|boolean")
    format: str | None = Field(default=None, description="date format, unit or currency symbol when known")
    count: int
    missing: int
    disguisedMissing: int
    distinct: int
    distinctRatio: float
    uniqueRatio: float = Field(description="values seen exactly once / non-missing values")
    topValues: list[ValueCount] = Field(default_factory=list)
    patterns: list[ValueCount] = Field(default_factory=list)
    length: LengthStats | None = None
    numeric: NumericStats | None = None
    dates: DateStats | None = None
    patternsEstimated: bool = Field(
        default=False,
        description="patterns counted on a sample of distinct values (very many distinct values)",
    )
    conformity: float | None = Field(
        default=None, description="share of non-missing values that fit the semantic type (and its format)"
    )


class DuplicateStats(Contract):
    exactRows: int = Field(description="rows that repeat an earlier row exactly")
    exactGroups: int
    nearRows: int = Field(description="rows equal to another after normalising case, spaces and punctuation")


class FunctionalDependency(Contract):
    lhs: list[str]
    rhs: str
    confidence: float = Field(description="share of rows that agree with their group's majority value")
    violatingRows: int


class RowNumbering(Contract):
    """How the 0-based data rows the run reports relate to the file, so a reader can find a row in it."""

    format: str = Field(description="csv | tsv | jsonl | parquet | xlsx")
    place: Literal["line", "sheet row"] | None = Field(
        default=None,
        description="what locates a row in the file when the reader knows it: a 1-based line of the text, or the "
        "row number a spreadsheet shows; None when rows have no such place (Parquet, a JSON array) or it "
        "could not be told (a CSV value spanning lines)",
    )
    firstPlace: int | None = Field(
        default=None, description="the place of data row 0 when every row r is at firstPlace + r"
    )


class DatasetProfile(Contract):
    schemaVersion: str = SCHEMA_VERSION
    name: str
    rowCount: int
    columnCount: int
    contentHash: str
    nullMarker: str = Field(description="the token this dataset uses for a missing value ('' if blank)")
    columns: list[ColumnProfile]
    duplicates: DuplicateStats
    candidateKeys: list[list[str]] = Field(default_factory=list)
    functionalDependencies: list[FunctionalDependency] = Field(default_factory=list)
    readNotes: list[str] = Field(default_factory=list, description="what the reader repaired or noticed")
    rowNumbering: RowNumbering | None = None
