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


class DateHistogram(Contract):
    """Rows per equal-width span of time between robust bounds (0.5th and 99.5th percentiles); tails apart."""

    edges: list[str] = Field(description="bin edges as ISO dates or date-times, len(counts) + 1")
    counts: list[int]
    below: int = Field(default=0, description="rows before the first edge")
    above: int = Field(default=0, description="rows after the last edge")


class DateStats(Contract):
    count: int
    min: str
    max: str
    formats: list[ValueCount] = Field(default_factory=list)
    median: str | None = None
    q1: str | None = None
    q3: str | None = None
    histogram: DateHistogram | None = None


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
    largestGroup: int = Field(default=0, description="rows in the largest group of identical rows (0: none)")
    example: list[int] = Field(
        default_factory=list, description="the first row that repeats an earlier one, then that earlier row"
    )


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


class MissingPattern(Contract):
    columns: list[int] = Field(description="indexes of the columns missing together in these rows")
    rows: int


class MissingOverview(Contract):
    """Where the table's missing cells are (blank, its null marker, or a placeholder such as `N/A` or -999):
    the per-column counts are each column's `missing + disguisedMissing`."""

    cells: int = Field(description="missing cells in the table")
    rows: int = Field(description="rows with at least one missing cell")
    patterns: list[MissingPattern] = Field(
        default_factory=list,
        description="the most frequent sets of columns missing together, most rows first",
    )
    patternCount: int = Field(default=0, description="distinct sets of missing columns among the rows")
    bandRows: list[int] = Field(
        default_factory=list, description="rows per band: the table cut into consecutive bands of rows"
    )
    bandColumns: list[int] = Field(
        default_factory=list,
        description="indexes of the columns with most missing cells (capped), file order",
    )
    bands: list[list[int]] = Field(
        default_factory=list, description="per column of bandColumns: its missing cells in each band"
    )


class SampleRows(Contract):
    """A few rows as the file holds them (values clipped), for a reader to see what the data looks like."""

    rows: list[int] = Field(description="0-based data rows")
    columns: list[int] = Field(description="indexes of the columns shown (the first ones when very wide)")
    values: list[list[str]] = Field(description="per row, its values in those columns")


class Association(Contract):
    """Two columns whose values go together: Spearman's rank correlation between numeric columns, or
    Cramér's V (bias-corrected) between columns of a few categories."""

    columns: list[str] = Field(description="the two columns")
    measure: Literal["spearman", "cramers_v"]
    value: float = Field(description="-1..1 for spearman, 0..1 for cramers_v")
    rows: int = Field(description="rows in which both columns hold a value")


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
    missingOverview: MissingOverview | None = None
    sample: SampleRows | None = None
    associations: list[Association] = Field(
        default_factory=list,
        description="the strong associations only, strongest first (see `associationsNote`)",
    )
    associationsNote: str | None = Field(
        default=None, description="what was compared: measures, threshold, and the caps on columns and rows"
    )
