"""DatasetReadError: the one error a reader raises, naming the file, the line and what to do."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LimitExceeded:
    """Which size/shape limit a file went over: the setting that raises it, its value, what was measured."""

    setting: str  # the environment variable, e.g. "ITERATE_MAX_COLUMNS"
    allowed: float
    measured: float  # at least this much: reading stops as soon as the limit is passed


class DatasetReadError(Exception):
    """A file that cannot be read as a table; `str(err)` is one line a person can act on.

    The state machine routes on the class name, so keep it `DatasetReadError`. `limit` is set when the
    file was refused by a size/shape limit (ITERATE_MAX_*), so callers never need to read the message.
    """

    def __init__(
        self,
        path: str | Path,
        problem: str,
        hint: str,
        *,
        line: int | None = None,
        limit: LimitExceeded | None = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        self.hint = hint
        self.limit = limit
        super().__init__(self.message)

    @property
    def message(self) -> str:
        where = Path(self.path).name or self.path
        if self.line is not None:
            where = f"{where}, line {self.line}"
        return f"{where}: {self.problem} — {self.hint}"

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only `line` and `limit` would be lost by the default pickling of Exception.args.
        return (_rebuild, (self.path, self.problem, self.hint, self.line, self.limit))


def _rebuild(
    path: str, problem: str, hint: str, line: int | None, limit: LimitExceeded | None = None
) -> DatasetReadError:
    return DatasetReadError(path, problem, hint, line=line, limit=limit)
