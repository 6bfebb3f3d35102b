"""`iterate analyze FILE`: the whole pipeline on a laptop, with progress on stderr and a one-screen summary."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from iterate.contracts import AnalysisResult
from iterate.visible import json_visible, visible

HELP = """\
Analyze a tabular file: profile it, find its data-quality problems, prove each one with code run in a
sandbox, and write a report. Runs offline with no AWS account and no LLM key.

Reads CSV/TSV (delimiter and quoting sniffed, .gz/.bz2/.xz), Parquet, JSON Lines and Excel .xlsx, in UTF-8
(with or without BOM), UTF-16 or cp1252/latin-1. Values are kept as text as written. The input is never
modified.

Writes into --out DIR (default ./iterate-out/<file name>/):
  analysis.json       "mode" first (offline | llm | degraded), then the issues, their evidence and
                      investigations, the summary and run metadata (timings, token usage, cost)
  report.html         one self-contained page: issues, evidence, investigation code, column charts
  flags.csv           row,column,issue_id,score for every cell believed wrong (row = 0-based data row, header
                      excluded; column = the header name, written exactly as in the file; only a
                      name or id starting with = + - @ TAB or CR gets a leading ' so a spreadsheet
                      cannot run it as a formula, and control characters other than TAB, LF and CR
                      are written escaped, ESC as \\x1b, U+202E as \\u202e; TAB, LF and CR stay as
                      they are, inside a quoted field, so a CSV reader gets the name back exactly)
  profile.json        column types and statistics, duplicates, candidate keys, dependencies
  understanding.json  the dataset and its columns in business language
  scripts/<issue>.py  each investigation that proved its issue, runnable on its own
  investigations/, steps/, data.parquet, candidates.json, issues.json   the steps' intermediate artifacts

Modes: with no ANTHROPIC_API_KEY the offline agents run ("offline"). With a key, Claude writes the
explanations and investigation code ("llm"); a step where Claude fails falls back to its offline twin and
the run says "degraded" with the reasons. Every number shown is computed by code from the data.

Environment: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, ITERATE_MODEL, ITERATE_LLM_TIMEOUT_S,
ITERATE_SANDBOX_TIMEOUT_S, ITERATE_SANDBOX_MEMORY_MB, ITERATE_INVESTIGATION_WORKERS, ITERATE_CACHE_DIR,
ITERATE_DEBUG=1 (print tracebacks).

Limits on the input (a file over one is refused before it is read in full, exit 2, with the limit, the
value measured and the variable that raises it): ITERATE_MAX_FILE_BYTES (5000000000),
ITERATE_MAX_DECOMPRESSED_BYTES (5000000000, for .gz/.bz2/.xz and the parts of an .xlsx),
ITERATE_MAX_COMPRESSION_RATIO (100; real tables compress 3-25 times), ITERATE_MAX_COLUMNS (10000),
ITERATE_MAX_CELLS (100000000, rows × columns), ITERATE_MAX_CELL_BYTES (16000000, one value),
ITERATE_MAX_JSON_DEPTH (100, nesting of a JSON record), ITERATE_MAX_XLSX_CELLS (5000000 cells of sheet
XML to parse; .xlsx is parsed at about 50,000 cells a second). Only regular files are read: a FIFO, a
device or a socket is refused without being opened.

Output: progress on stderr (one updating line on a terminal, one line per finished step otherwise, none
with --quiet); on stdout a one-screen summary (dataset, mode, issues by severity, the top 10 issues, where
the files are), or with --json the content of analysis.json. Names, values and file names are printed
with control characters made visible (ESC as \\x1b, a newline as \\n, U+202E as \\u202e), so a hostile
file cannot move the cursor, clear the screen or reverse text; report.html shows them the same way.

Exit codes: 0 the analysis ran (whatever it found); 2 the file is missing or could not be read (one line
naming the file, the line and what to do) or an ITERATE_* setting is invalid; 1 an unexpected error (one
line; ITERATE_DEBUG=1 prints the traceback); 130 interrupted.
"""

STEP_LABELS = {
    "read": "Reading",
    "detect": "Detecting",
    "profile": "Profiling",
    "understand": "Understanding",
    "analyze": "Analyzing",
    "investigate": "Investigating",
    "report": "Writing report",
}


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "analyze",
        help="analyze FILE: write report.html, analysis.json, flags.csv (see iterate analyze --help)",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="FILE", help="the dataset to analyze")
    parser.add_argument("--out", metavar="DIR", help="output directory (default ./iterate-out/<file name>/)")
    parser.add_argument(
        "--instructions",
        metavar="TEXT",
        help="context for the agents, e.g. 'amounts are in EUR; status is an enum'",
    )
    parser.add_argument(
        "--json", action="store_true", help="print analysis.json to stdout instead of the summary"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.set_defaults(func=run)


class Progress:
    """Step progress on stderr: one updating line on a terminal, one line per finished step otherwise."""

    def __init__(
        self,
        stream: TextIO,
        *,
        quiet: bool,
        tty: bool | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty() if tty is None else tty
        self.clock = clock
        self.started = clock()
        self.last_step = ""
        self.open_line = False  # a terminal line is drawn and not yet ended
        try:  # block characters where the terminal can print them, plain ASCII otherwise
            "█░".encode(getattr(stream, "encoding", None) or "ascii")
            self.cells = ("█", "░")
        except (LookupError, UnicodeEncodeError):
            self.cells = ("#", "-")

    def __call__(self, step: str, done: int, total: int, message: str) -> None:
        if self.quiet:
            return
        elapsed = self.clock() - self.started
        label = STEP_LABELS.get(step, step)
        message = visible(message)  # names in it must never break the line, nor act on the terminal
        if self.tty:
            width = 24
            filled = min(int(width * done / total), width) if total else width
            bar = self.cells[0] * filled + self.cells[1] * (width - filled)
            line = f"\r{label:<15} {bar} {done}/{total}  {elapsed:5.1f}s  {message[:50]}\x1b[K"
            self.stream.write(line)
            self.open_line = True
            if step == "report" and done >= total:
                self.end_line()
            self.stream.flush()
        elif done >= total and total:
            self.stream.write(f"{elapsed:7.1f}s  {label}: done{(' — ' + message) if message else ''}\n")
            self.stream.flush()
        self.last_step = step

    def end_line(self) -> None:
        """End the terminal's updating line so the next output starts on a fresh one."""
        if self.open_line:
            self.stream.write("\n")
            self.stream.flush()
            self.open_line = False


def default_out(path: Path) -> Path:
    name = path.name
    for suffix in (".gz", ".bz2", ".xz"):
        name = name.removesuffix(suffix)
    return Path("iterate-out") / (Path(name).stem or "dataset")


SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2}


def summary_text(result: AnalysisResult, out: Path, *, width: int = 100) -> str:
    """The one-screen summary: dataset, mode, issues by severity, the top issues, where the files are."""
    run = result.run
    counts = Counter(i.severity for i in result.issues)
    lines = []
    if run is not None:
        lines.append(
            f"{visible(run.datasetName)}: {run.rowCount:,} rows × {run.columnCount} columns,"
            f" {run.durationMs / 1000:.1f}s"
        )
    reasons = visible("; ".join(run.degradedReasons[:2])) if run and run.degradedReasons else ""
    mode = result.mode + (f" ({reasons})" if reasons else "")
    lines.append(f"mode: {mode}"[:width])
    lines.append(
        f"{len(result.issues)} issues: {counts.get('high', 0)} high, {counts.get('medium', 0)} medium, "
        f"{counts.get('low', 0)} low"
    )
    ranked = sorted(
        result.issues,
        key=lambda i: (
            SEVERITY_RANK.get(i.severity, 9),
            -(i.evidence.affectedRows if i.evidence else 0),
            i.id,
        ),
    )
    for issue in ranked[:10]:
        share = f"{issue.evidence.affectedShare:.1%}" if issue.evidence else ""
        proven = ""
        if issue.investigation is not None:
            proven = "proven" if issue.investigation.success and issue.status == "confirmed" else issue.status
        # a header name with a newline or an escape sequence must not break the line nor act
        cols = visible(", ".join(issue.affectedColumns[:3]) + ("…" if len(issue.affectedColumns) > 3 else ""))
        n_rows = issue.evidence.affectedRows if issue.evidence else issue.affectedRows
        rows = f"{n_rows:,} row{'' if n_rows == 1 else 's'}" if n_rows is not None else ""
        kind = visible(issue.type)
        line = f"  {issue.severity:<6} {kind:<22} {cols[:30]:<30} {rows:>12} {share:>7}  {visible(proven)}"
        lines.append(line.rstrip()[:width])
    if len(result.issues) > 10:
        lines.append(f"  … and {len(result.issues) - 10} more in the report")
    lines.append(f"report:   {visible(out / 'report.html')}")
    lines.append(f"analysis: {visible(out / 'analysis.json')}")
    lines.append(f"flags:    {visible(out / 'flags.csv')}")
    return "\n".join(lines)


def _one_line(text: str) -> str:
    """Free text (an exception's message) on one line, whitespace collapsed, controls made visible."""
    return visible(" ".join(str(text).split()))


def run(args: argparse.Namespace) -> int:
    """Run the analysis; 0 when it ran (whatever it found), 2 on unreadable input or settings, 1 otherwise."""
    from pydantic import ValidationError

    from iterate.io import DatasetReadError, ReadLimits, check_source
    from iterate.pipeline import run_local
    from iterate.settings import Settings

    path = Path(args.file)
    out = Path(args.out) if args.out else default_out(path)
    progress = Progress(sys.stderr, quiet=args.quiet)
    try:
        settings = Settings.from_env()
    except ValidationError as exc:
        bad = ", ".join(str(e["loc"][0]) for e in exc.errors())
        print(f"iterate: error: invalid setting in the environment: {bad} — fix or unset it", file=sys.stderr)
        return 2
    if not path.exists():
        print(
            f"iterate: error: {visible(path)}: file not found — check the path and try again", file=sys.stderr
        )
        return 2
    if path.is_dir():
        print(f"iterate: error: {visible(path)}: is a directory — give one data file", file=sys.stderr)
        return 2
    try:  # a FIFO, a device or a file over the size limit is refused before anything starts
        check_source(path, ReadLimits.from_settings(settings))
    except DatasetReadError as exc:
        print(f"iterate: error: {visible(exc)}", file=sys.stderr)
        return 2
    try:
        result = run_local(path, out, instructions=args.instructions, settings=settings, progress=progress)
    except DatasetReadError as exc:
        progress.end_line()
        print(f"iterate: error: {visible(exc)}", file=sys.stderr)  # one line, with the file's name as it is
        return 2
    except KeyboardInterrupt:
        progress.end_line()
        print("iterate: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        progress.end_line()
        if os.environ.get("ITERATE_DEBUG"):
            sys.stderr.write(visible(traceback.format_exc(), keep="\n"))
        print(
            f"iterate: error: unexpected {type(exc).__name__}: {_one_line(str(exc))[:300]} "
            "(re-run with ITERATE_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 1
    progress.end_line()
    if args.json:
        written = out / "analysis.json"
        # the file's text when it exists, so `--json` and the file never disagree; JSON escapes C0
        # controls itself, and the ones it leaves raw (C1, bidi) are written as escapes of the same value
        text = written.read_text(encoding="utf-8") if written.is_file() else result.model_dump_json(indent=2)
        print(json_visible(text))
    else:
        print(summary_text(result, out, width=max(shutil.get_terminal_size((100, 24)).columns, 60)))
    return 0
