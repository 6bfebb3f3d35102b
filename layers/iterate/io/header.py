"""Header names as written, with blanks named `column_<n>` and duplicates recorded (Table allows them)."""

from __future__ import annotations

from iterate.table import ReadProblem


def normalize_header(raw: list[str], *, line: int | None) -> tuple[list[str], list[ReadProblem]]:
    """Names to show for each column, plus a ReadProblem for every blank or repeated name."""
    names: list[str] = []
    problems: list[ReadProblem] = []
    for i, name in enumerate(raw, start=1):
        if name.strip() == "":
            generated = f"column_{i}"
            problems.append(
                ReadProblem(
                    kind="blank_header",
                    line=line,
                    row=None,
                    column=generated,
                    detail=f"column {i} has no name in the header; it was named '{generated}'",
                )
            )
            name = generated
        names.append(name)
    seen: dict[str, int] = {}
    for i, name in enumerate(names, start=1):
        if name in seen:
            problems.append(
                ReadProblem(
                    kind="duplicate_header",
                    line=line,
                    row=None,
                    column=name,
                    detail=f"columns {seen[name]} and {i} are both named '{name}'; both were kept",
                )
            )
        else:
            seen[name] = i
    return names, problems


def internal_names(n: int) -> list[str]:
    """Unique placeholder names for pyarrow, which needs them unique; the real names travel beside."""
    return [f"c{i}" for i in range(n)]
