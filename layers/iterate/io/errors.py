"""DatasetReadError: the one error a reader raises, naming the file, the line and what to do."""

from __future__ import annotations

from pathlib import Path


class DatasetReadError(Exception):
    """A file that cannot be read as a table; `str(err)` is one line a person can act on.

    The state machine routes on the class name, so keep it `DatasetReadError`.
    """

    def __init__(self, path: str | Path, problem: str, hint: str, *, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        self.hint = hint
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
        # Keyword-only `line` would be lost by the default pickling of Exception.args.
        return (_rebuild, (self.path, self.problem, self.hint, self.line))


def _rebuild(path: str, problem: str, hint: str, line: int | None) -> DatasetReadError:
    return DatasetReadError(path, problem, hint, line=line)
