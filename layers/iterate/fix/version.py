"""A run's fixes as a new version of its input: the plan (issue → action → cells from the run's own evidence),
the new file in the input's format, changes.csv and version.json. The input file is only ever read."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import lzma
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.contracts import AnalysisResult, FixAction, Issue
from iterate.fix.engine import Change, FixError, FixResult, FixStep
from iterate.report.flags import neutralise
from iterate.table import Table
from iterate.visible import visible

CHANGES_HEADER = ("row", "column", "old", "new", "issue_id", "action")


@dataclass(frozen=True)
class RunInput:
    """The analysed file of a run, checked to be the very bytes the run read."""

    path: Path  # where it is read from (locally the input itself; on AWS a downloaded copy)
    sha256: str
    analysis: AnalysisResult
    name: str = ""  # the input's file name ("" : path's)
    label: str = ""  # how version.json names the parent ("" : path)
    run_id: str = ""  # the run whose evidence is used ("" : analysis.json's run id)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.name or self.path.name)
        object.__setattr__(self, "label", self.label or str(self.path))
        if not self.run_id and self.analysis.run is not None:
            object.__setattr__(self, "run_id", self.analysis.run.runId)


def sha256_of(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def run_input(run_dir: Path) -> RunInput:
    """The input of the run in `run_dir` (recorded by `iterate analyze` in .iterate-run.json), or FixError."""
    from iterate.cli.rundir import MARKER

    try:
        analysis = AnalysisResult.model_validate_json((run_dir / "analysis.json").read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise FixError(
            f"{run_dir / 'analysis.json'} not found: run `iterate analyze FILE --out {run_dir}` first"
        ) from exc
    except ValueError as exc:
        raise FixError(f"{run_dir / 'analysis.json'} is damaged: run `iterate analyze` again") from exc
    try:
        marker = json.loads((run_dir / MARKER).read_text(encoding="utf-8"))
        recorded = marker.get("sourcePath") if isinstance(marker, dict) else None
        copy = marker.get("inputCopy") if isinstance(marker, dict) else None
        if recorded is None and isinstance(copy, str):  # data read from stdin, kept in the run directory
            recorded = str(run_dir / copy)
    except (OSError, ValueError):
        recorded = None
    if not isinstance(recorded, str):
        raise FixError(
            f"{run_dir} does not record where its input file is (a run from an older Iterate, or of stdin): "
            f"run `iterate analyze FILE --out {run_dir}` again"
        )
    path = Path(recorded)
    if not path.is_file():
        raise FixError(
            f"{path}, the input of the run in {run_dir}, is gone — put it back or analyse it again"
        )
    digest = sha256_of(path)
    expected = analysis.run.contentHash if analysis.run is not None else ""
    if digest != expected:
        raise FixError(
            f"{path} changed since the run in {run_dir} read it (its sha256 differs): the run's evidence no longer "
            f"points at its cells — run `iterate analyze {path} --out {run_dir}` again"
        )
    return RunInput(path=path, sha256=digest, analysis=analysis)


def flagged_cells(path: Path, columns: Sequence[str]) -> dict[tuple[str, str], np.ndarray]:
    """flags.csv as (issue id, column name) → its 0-based rows; names are matched back from how flags.csv
    writes them (a formula-like name with its `'`, control characters escaped)."""
    import pyarrow.csv as pacsv

    if not path.is_file():
        return {}
    table = pacsv.read_csv(
        path,
        convert_options=pacsv.ConvertOptions(
            column_types={"row": pa.int64(), "column": pa.string(), "issue_id": pa.string()}
        ),
    )
    written = {neutralise(visible(c, keep="\t\n\r")): c for c in columns}
    out: dict[tuple[str, str], list[np.ndarray]] = {}
    rows = table.column("row").to_numpy()
    keys = pc.binary_join_element_wise(table.column("issue_id"), table.column("column"), "\x00")
    enc = pc.dictionary_encode(keys).combine_chunks()
    codes = enc.indices.to_numpy(zero_copy_only=False)
    for i, key in enumerate(enc.dictionary.to_pylist()):
        issue_id, col = key.split("\x00", 1)
        name = written.get(col, col)
        out.setdefault((issue_id, name), []).append(rows[codes == i])
    return {k: np.unique(np.concatenate(v)) for k, v in out.items()}


def issue_column(issue: Issue) -> str | None:
    stats = issue.evidence.stats if issue.evidence else {}
    col = stats.get("column") or stats.get("rhs")
    return str(col) if col else (issue.affectedColumns[0] if len(issue.affectedColumns) == 1 else None)


def evidence_kind(issue: Issue, flagged: Collection[tuple[str, str]]) -> str | None:
    """Where a fix of `issue` takes its rows from, or None when the run holds nothing cell-level for it
    (`flagged`: the (issue id, column) pairs of flags.csv). Cheap: the follow-up asks it before offering a fix."""
    stats = issue.evidence.stats if issue.evidence else {}
    col = issue_column(issue)
    if col is not None and (issue.id, col) in flagged:
        return "flags"
    if col is None and any(key[0] == issue.id for key in flagged):
        return "flags of its columns"
    gaps = issue.type in ("missing_values", "disguised_missing") and col is not None
    if gaps and ("markers" in stats or "missing_markers" in stats):
        return "markers"
    if issue.type in ("duplicate_rows", "near_duplicate_rows"):
        return "repeats"
    if issue.type == "constant_column":
        return "every row"
    return None


NO_EVIDENCE = (
    "the run holds no cell-level evidence for this issue (no lines in flags.csv) — it cannot be applied as a "
    "fix; review it by hand"
)


def evidence_rows(issue: Issue, table: Table, flags: dict[tuple[str, str], np.ndarray]) -> np.ndarray:
    """The rows the run says `issue` touches: its flags.csv cells; for issues about facts rather than wrong
    values (missing markers, repeated rows), the run's own definition, checked against its count."""
    stats = issue.evidence.stats if issue.evidence else {}
    col = issue_column(issue)
    kind = evidence_kind(issue, flags)
    if kind == "flags":
        assert col is not None
        return flags[(issue.id, col)]
    if kind == "flags of its columns":  # an issue of several columns: every row flagged in any of them
        return np.unique(np.concatenate([rows for (owner, _), rows in flags.items() if owner == issue.id]))
    others: list[str] = []
    if kind == "markers":
        assert col is not None
        values = table.column(col).values
        if "markers" in stats:  # the values as written
            markers = pa.array([str(m) for m in stats["markers"]], pa.string())
            hit = pc.is_in(values, value_set=markers)
        else:  # the `missing` rule: a null, or a token read as missing once stripped and casefolded
            tokens = pa.array([str(m) for m in stats["missing_markers"]], pa.string())
            hit = pc.or_kleene(
                pc.is_null(values), pc.is_in(pc.utf8_lower(pc.utf8_trim_whitespace(values)), value_set=tokens)
            )
        rows = np.flatnonzero(hit.to_numpy(zero_copy_only=False))
        # Cells of this column that another issue of the run holds (blanks that travel with other columns)
        # are that issue's to fix, not this one's.
        others = [other for (other, column) in flags if column == col and other != issue.id]
        for other in others:
            rows = np.setdiff1d(rows, flags[(other, col)])
    elif kind == "repeats":
        rows = _repeats(table, [str(c) for c in stats.get("columns", issue.affectedColumns)], issue.type)
    elif kind == "every row":
        rows = np.arange(table.n_rows)
    else:
        raise FixError(f"{issue.id}: {NO_EVIDENCE}")
    if issue.affectedRows is not None and kind != "every row" and len(rows) != issue.affectedRows:
        # The file is the run's (its hash was checked): the count differs because this fix cannot tell this
        # issue's cells from others', not because anything changed. Say so, and what to do instead.
        held = f" (not counting the {', '.join(others[:3])} issue's cells)" if others else ""
        raise FixError(
            f"{issue.id}: the run counted {issue.affectedRows:,} rows, but {len(rows):,} rows of {col!r} match "
            f"its definition{held}, and flags.csv lists none of its own cells: this fix cannot tell which are "
            "its own. Fix the column by hand, or name its other issues in the same fix"
        )
    return rows


def _repeats(table: Table, columns: list[str], kind: str) -> np.ndarray:
    """Rows equal to an earlier row on `columns` (the first copy is kept): exactly, or once case, spacing and
    punctuation are normalised (near duplicates, without the exact ones), as the duplicates detector does."""

    def key_codes(values: pa.Array, near: bool) -> np.ndarray:
        if near:
            values = pc.utf8_trim_whitespace(
                pc.replace_substring_regex(pc.utf8_lower(values), pattern=r"[^\w]+", replacement=" ")
            )
        return pc.dictionary_encode(values).indices.to_numpy(zero_copy_only=False).astype(np.int64)

    def later(near: bool) -> np.ndarray:
        codes = np.stack([key_codes(table.column(c).values, near) for c in columns], axis=1)
        _, first = np.unique(codes, axis=0, return_inverse=True)
        first = first.reshape(-1)
        seen = np.zeros(first.max() + 1 if len(first) else 0, dtype=bool)
        out = []
        for r, k in enumerate(first.tolist()):
            if seen[k]:
                out.append(r)
            seen[k] = True
        return np.array(out, dtype=np.int64)

    exact = later(False)
    return exact if kind == "duplicate_rows" else np.setdiff1d(later(True), exact)


def plan(
    issues: Sequence[tuple[Issue, FixAction]], table: Table, flags: dict[tuple[str, str], np.ndarray]
) -> list[FixStep]:
    return [
        FixStep(
            issue_id=issue.id,
            action=action,
            rows=evidence_rows(issue, table, flags),
            column=issue_column(issue),
        )
        for issue, action in issues
    ]


# ---- writing the new version --------------------------------------------------------------------------


def _open_out(path: Path, compression: str | None) -> Any:
    if compression in ("gzip", "gz"):
        return gzip.open(path, "wb")
    if compression == "bz2":
        return bz2.open(path, "wb")
    if compression in ("xz", "lzma"):
        return lzma.open(path, "wb")
    return path.open("wb")


def _head_text(path: Path, encoding: str, compression: str | None) -> str:
    opener: Any = {"gzip": gzip.open, "gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}.get(
        compression or "", open
    )
    with opener(path, "rb") as fh:
        raw = fh.read(64 * 1024)
    return raw.decode(encoding, errors="replace")


def write_version(source: Table, result: FixResult, parent: Path, target: Path) -> str:
    """Write the fixed table to `target` in the format of `parent`; returns the format written."""
    fmt = source.source.format
    if fmt == "parquet":
        _write_parquet(parent, result, target)
    elif fmt in ("jsonl", "json"):
        _write_json(parent, source, result, target)
    elif fmt == "xlsx":
        _write_csv(result.table, target, encoding="utf-8", delimiter=",", quote_all=False, newline="\n")
        return "csv"
    else:
        encoding = source.source.encoding or "utf-8"
        head = _head_text(parent, encoding, source.source.compression)
        delimiter = source.source.delimiter or ","
        newline = "\r\n" if "\r\n" in head else ("\r" if "\r" in head and "\n" not in head else "\n")
        first = head.lstrip("\ufeff").split(newline, 1)[0]
        fields = first.split(delimiter)
        all_quoted = bool(fields) and all(
            f.startswith('"') and f.endswith('"') and len(f) >= 2 for f in fields
        )
        _write_csv(
            result.table,
            target,
            encoding=encoding,
            delimiter=delimiter,
            quote_all=all_quoted,
            newline=newline,
            compression=source.source.compression,
        )
    return fmt


def _csv_line(fields: Iterable[str], delimiter: str, quote_all: bool, newline: str) -> str:
    """One CSV line, a field quoted when it holds the delimiter, a quote, CR or LF (csv.writer misses a bare
    CR when its line end is LF), or always with `quote_all`."""
    out = []
    for text in fields:
        if quote_all or delimiter in text or any(ch in text for ch in '"\r\n'):
            text = '"' + text.replace('"', '""') + '"'
        out.append(text)
    return delimiter.join(out) + newline


def _write_csv(
    table: pa.Table,
    target: Path,
    *,
    encoding: str,
    delimiter: str,
    quote_all: bool,
    newline: str,
    compression: str | None = None,
) -> None:
    with _open_out(target, compression) as raw:
        text = io.TextIOWrapper(raw, encoding=encoding, newline="")
        text.write(_csv_line(table.column_names, delimiter, quote_all, newline))
        columns = [c.to_pylist() for c in table.columns]
        for row in zip(*columns, strict=True):
            text.write(_csv_line(("" if v is None else str(v) for v in row), delimiter, quote_all, newline))
        text.flush()
        text.detach()


def _write_parquet(parent: Path, result: FixResult, target: Path) -> None:
    """The parent's typed columns, rows and columns dropped as the fix says; in an edited column only the changed
    cells are replaced, by their new text cast to the column's type (null where a value was cleared), so its
    other values, nulls included, are the parent's own."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(parent) as pf:
        original = pf.read()
        metadata = pf.schema_arrow.metadata
    edits: dict[str, dict[int, str | None]] = {}
    for ch in result.changes:
        if ch.row is not None and ch.column and ch.action not in ("flag_for_review", "drop_rows"):
            edits.setdefault(ch.column, {})[ch.row] = ch.new
    kept = np.setdiff1d(np.arange(original.num_rows), result.dropped_rows)
    arrays, fields = [], []
    for f in original.schema:
        if f.name in result.dropped_columns:
            continue
        column: Any = original.column(f.name)
        if f.name in edits:
            rows = sorted(edits[f.name])
            texts = pa.array([edits[f.name][r] for r in rows], pa.string())
            try:
                typed = texts.cast(f.type).to_pylist()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise FixError(
                    f"the fixed values of {f.name!r} cannot be stored as its Parquet type {f.type} ({exc}); "
                    "choose another fix for it"
                ) from exc
            values = column.to_pylist()
            for r, v in zip(rows, typed, strict=True):
                values[r] = v
            column = pa.array(values, type=f.type)
        if len(kept) != original.num_rows:
            column = column.take(pa.array(kept))
        arrays.append(column)
        fields.append(f.with_nullable(True))
    pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=metadata)), target)


def _write_json(parent: Path, source: Table, result: FixResult, target: Path) -> None:
    """Each record of the parent with its fixed values: a number stays a number, a cleared value is null."""
    from iterate.io.jsonl import _EXACT, _dump, _Number

    raw = parent.read_bytes().decode(source.source.encoding or "utf-8")
    if raw.lstrip().startswith("["):
        records: list[Any] = _EXACT.decode(raw)
        array = True
    else:
        records = [_EXACT.decode(line) for line in raw.splitlines() if line.strip()]
        array = False
    if len(records) != source.n_rows:
        raise FixError(f"{parent}: {len(records):,} records, but the run read {source.n_rows:,} rows")
    dropped = set(result.dropped_rows.tolist())
    for ch in result.changes:
        if ch.row is None or not ch.column or ch.action in ("drop_rows", "flag_for_review"):
            continue
        record = records[ch.row]
        old = record.get(ch.column)
        if ch.new is None:
            record[ch.column] = None
        elif isinstance(old, _Number) or (old is None and _is_number(ch.new)):
            record[ch.column] = _Number(ch.new) if _is_number(ch.new) else ch.new
        else:
            record[ch.column] = ch.new
    lines = []
    for r, record in enumerate(records):
        if r in dropped:
            continue
        for col in result.dropped_columns:
            record.pop(col, None)
        lines.append(_dump(record))
    text = ("[\n" + ",\n".join(lines) + "\n]\n") if array else "\n".join(lines) + ("\n" if lines else "")
    target.write_text(text, encoding=source.source.encoding or "utf-8")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip() == text and text.lower() not in ("nan", "inf", "-inf", "infinity")


def _csv_cell(text: str | None) -> str:
    """A changes.csv field: empty for none, control characters escaped, neutralised against formulas."""
    return "" if text is None else neutralise(visible(text, keep="\t\n\r"))


def write_changes(changes: Iterable[Change], target: Path) -> int:
    """changes.csv, sorted by row then column; returns its number of lines (header excluded)."""
    n = 0
    with target.open("w", encoding="utf-8", newline="") as fh:
        fh.write(_csv_line(CHANGES_HEADER, ",", False, "\n"))
        for ch in sorted(changes, key=lambda c: (-1 if c.row is None else c.row, c.column, c.issue_id)):
            fields = (
                "" if ch.row is None else str(ch.row),
                *(_csv_cell(x) for x in (ch.column, ch.old, ch.new, ch.issue_id)),
                ch.action,
            )
            fh.write(_csv_line(fields, ",", False, "\n"))
            n += 1
    return n
