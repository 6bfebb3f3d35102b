"""`iterate analyze FILE`: the whole pipeline on a laptop, with progress on stderr and a one-screen summary."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

from iterate.contracts import SEVERITIES, SEVERITY_RANK, Acceptance, AnalysisResult, Issue, RunComparison
from iterate.issueref import short_ids
from iterate.visible import json_visible, visible

if TYPE_CHECKING:
    from iterate.io import ReadLimits

HELP = """\
Analyze a tabular file: profile it, find its data-quality problems, prove each one with code run in a
sandbox, and write a report. Runs offline with no AWS account and no LLM key. FILE - reads stdin.

Reads CSV/TSV (delimiter and quoting sniffed; gzip, bzip2 or xz compressed: .gz/.bz2/.xz or recognised by
their first bytes), Parquet, JSON Lines and Excel .xlsx (also under an .xls name), in UTF-8 (with or without
BOM), UTF-16 or cp1252/latin-1. Values are kept as text as written. The input is never modified.

Writes into --out DIR (default ./iterate-out/<file name>/; with --json and no --out, a temporary directory
that is deleted afterwards):
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
  followups/          the conversations of `iterate followup` on this run
  .iterate-run.json   which input file the run is of
DIR belongs to one input file (by name). Running the same file again replaces its run (everything above is
removed first; other files stay) and compares the new run with it; a directory holding another file's run,
or a non-empty one with no run, is refused (exit 2) untouched.

Modes: with no ANTHROPIC_API_KEY the offline agents run ("offline"); --instructions then changes nothing
(only Claude reads them; they are kept in analysis.json, and the run says so). With a key, Claude writes the
explanations and investigation code ("llm"); a step where Claude fails falls back to its offline twin and
the run says "degraded" with the reasons. Every number shown is computed by code from the data.

Environment: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, ITERATE_MODEL, ITERATE_LLM_TIMEOUT_S,
ITERATE_SANDBOX_TIMEOUT_S, ITERATE_SANDBOX_MEMORY_MB, ITERATE_INVESTIGATION_WORKERS, ITERATE_CACHE_DIR,
ITERATE_DEBUG=1 (print tracebacks).

Limits on the input (a file over one is refused before it is read in full, exit 2, with the limit, the
value measured and the variable that raises it): ITERATE_MAX_FILE_BYTES (5000000000, also for stdin),
ITERATE_MAX_DECOMPRESSED_BYTES (5000000000, for .gz/.bz2/.xz and the parts of an .xlsx),
ITERATE_MAX_COMPRESSION_RATIO (100; real tables compress 3-25 times), ITERATE_MAX_COLUMNS (10000),
ITERATE_MAX_CELLS (100000000, rows × columns), ITERATE_MAX_CELL_BYTES (16000000, one value),
ITERATE_MAX_JSON_DEPTH (100, nesting of a JSON record), ITERATE_MAX_XLSX_CELLS (5000000 cells of sheet
XML to parse; .xlsx is parsed at about 50,000 cells a second). Only regular files are read: a FIFO, a
device or a socket is refused without being opened.

Output: progress on stderr (on a terminal one updating line: the whole run's bar, the step and its count
when it has several items, the time so far and, past 5 s, the time left; otherwise one line per finished
step). On stdout a one-screen summary (dataset, mode, issues by severity, the top 10 issues with their proof
status, where the files are), ending on the same time as the progress; with --json the content of
analysis.json instead. --quiet prints nothing but errors (and the JSON with --json). Names, values and file
names are printed with control characters made visible (ESC as \\x1b, a newline as \\n, U+202E as
\\u202e), so a hostile file cannot move the cursor, clear the screen or reverse text; report.html shows them
the same way.

Exit codes: 0 the analysis ran (whatever it found); 2 the file is missing or could not be read (one line
naming the file, the line and what to do), --out cannot be used, or an ITERATE_* setting is invalid; 1 an
unexpected error (one line; ITERATE_DEBUG=1 prints the traceback); 130 interrupted; 141 stdout was closed
before the output was written (e.g. `| head`), said nowhere.
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
# The share of a run each step takes, for the overall bar and the time left (nothing else reads them).
# Offline: the sample, the 1M-row and the 500-column benchmarks (detection and the proofs dominate). With
# Claude: its calls in understand, analyze and investigate dominate. The profile's statistics come before the
# detection here: a long table's are computed before it; a short table's, forked beside it, are collected
# after it, when the bar (which never goes back) is past them already.
OFFLINE_WEIGHTS = {
    "read": 12,
    "profile": 10,
    "detect": 40,
    "understand": 1,
    "analyze": 1,
    "investigate": 30,
    "report": 6,
}
LLM_WEIGHTS = {
    "read": 4,
    "profile": 4,
    "detect": 12,
    "understand": 15,
    "analyze": 20,
    "investigate": 40,
    "report": 5,
}
# The time left is shown once a run has taken this long (and is a tenth done): short runs need none.
ESTIMATE_AFTER_S = 5.0
EXIT_BROKEN_PIPE = 141  # what a shell reports for a command killed by SIGPIPE (128 + 13)
STDIN = "-"


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "analyze",
        help="analyze FILE: write report.html, analysis.json, flags.csv (see iterate analyze --help)",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="FILE", help="the dataset to analyze; - reads it from stdin")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="output directory (default ./iterate-out/<file name>/; with --json, none: no files are kept)",
    )
    parser.add_argument(
        "--name",
        metavar="NAME",
        help=(
            "with - (stdin): the data's name, e.g. orders.csv (its extension says the format). It names the "
            "run directory and the report, and a later run of the same name is compared with this one; "
            "without it, stdin runs are named 'stdin' and never compared"
        ),
    )
    parser.add_argument(
        "--instructions",
        metavar="TEXT",
        help=(
            "context for Claude, e.g. 'amounts are in EUR; status is an enum'. Offline (no ANTHROPIC_API_KEY) "
            "it changes nothing: it is only recorded in analysis.json"
        ),
    )
    parser.add_argument(
        "--json", action="store_true", help="print analysis.json to stdout instead of the summary"
    )
    parser.add_argument(
        "--quiet", action="store_true", help="print nothing but errors (and the JSON with --json)"
    )
    parser.add_argument(
        "--fail-on",
        choices=SEVERITIES,
        metavar="SEVERITY",
        help=(
            "a gate for pipelines: exit 3 when an issue of this severity or above was found "
            "(high, medium or low); the files are written and the summary printed as usual"
        ),
    )
    parser.add_argument(
        "--accepted",
        metavar="PATH",
        type=Path,
        help=(
            "the accepted-issues file (see iterate accept); default: the nearest .iterate/accepted.json in the "
            "input's directory or one above it. Accepted issues are still reported, marked, and never fail "
            "--fail-on"
        ),
    )
    parser.add_argument(
        "--workers",
        type=_positive,
        metavar="N",
        help=(
            "processes that read a large CSV in parallel, in byte ranges of ITERATE_CHUNK_BYTES "
            "(default: ITERATE_WORKERS, else the number of cores up to 4, 1 on 2 cores or fewer); the results are the "
            "same for any N"
        ),
    )
    parser.set_defaults(func=run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of processes (1 or more)")
    return value


EXIT_GATE = 3  # --fail-on: an issue at or above the severity was found


def gate_failures(issues: list[Issue], fail_on: str | None, *, accepted: bool = False) -> list[Issue]:
    """The issues that fail a `--fail-on` gate: those at `fail_on` or a more severe level that no one accepted
    (none without a gate); accepted=True: the accepted ones the gate lets pass instead."""
    if fail_on is None:
        return []
    worst = SEVERITIES.index(fail_on)
    return [
        i for i in issues if SEVERITIES.index(i.severity) <= worst and (i.accepted is not None) == accepted
    ]


def _acceptances(given: Path | None, input_dir: Path | None) -> list[Acceptance]:
    """The accepted issues for a run: from `given`, or the nearest .iterate/accepted.json above the input."""
    from iterate.accepted import AcceptError, find_accepted, load_accepted

    if given is not None and not given.is_file():
        raise AcceptError(f"--accepted {given}: file not found — check the path (iterate accept creates it)")
    path = given if given is not None else (find_accepted(input_dir) if input_dir is not None else None)
    return load_accepted(path).accepted if path is not None else []


def _duration(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s"


class Progress:
    """Progress on stderr: on a terminal one updating line (the whole run's bar, the step, its count when it
    has several items, the time so far and, on long runs, the time left); elsewhere one line per finished
    step. Every time it shows is read from one clock, the one the summary's total comes from."""

    def __init__(
        self,
        stream: TextIO,
        *,
        quiet: bool,
        tty: bool | None = None,
        clock: Callable[[], float] = time.perf_counter,
        started: float | None = None,
        weights: dict[str, int] | None = None,
        columns: int | None = None,
    ) -> None:
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty() if tty is None else tty
        self.clock = clock
        self.started = clock() if started is None else started
        self.weights = weights or OFFLINE_WEIGHTS
        self.columns = columns or shutil.get_terminal_size((100, 24)).columns
        self.fraction = 0.0  # of the whole run, never going back
        self.last_step = ""
        self.open_line = False  # a terminal line is drawn and not yet ended
        try:  # block characters where the terminal can print them, plain ASCII otherwise
            "█░".encode(getattr(stream, "encoding", None) or "ascii")
            self.cells = ("█", "░")
        except (LookupError, UnicodeEncodeError):
            self.cells = ("#", "-")

    def elapsed(self) -> float:
        return self.clock() - self.started

    def _advance(self, step: str, done: int, total: int) -> float:
        order = list(self.weights)
        if step in self.weights:
            before = sum(self.weights[s] for s in order[: order.index(step)])
            part = self.weights[step] * (min(done, total) / total if total > 0 else 1.0)
            self.fraction = max(self.fraction, (before + part) / sum(self.weights.values()))
        return self.fraction

    def left(self, elapsed: float) -> str:
        """'about 12s left' once the run is long enough to need it, else ''."""
        f = self.fraction
        if elapsed < ESTIMATE_AFTER_S or f < 0.1 or f >= 1.0:
            return ""
        remaining = elapsed * (1 - f) / f
        return f"about {_duration(remaining)} left" if remaining >= 1.0 else ""  # never "about 0s left"

    def _bar(self, fraction: float, width: int = 20) -> str:
        filled = min(int(width * fraction), width)
        return self.cells[0] * filled + self.cells[1] * (width - filled)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError:  # stderr closed or a broken pipe: the run goes on without its display
            self.quiet = True

    def __call__(self, step: str, done: int, total: int, message: str) -> None:
        if self.quiet:
            return
        elapsed = self.elapsed()
        fraction = self._advance(step, done, total)
        label = STEP_LABELS.get(step, step)
        message = visible(message)  # names in it must never break the line, nor act on the terminal
        left = self.left(elapsed)
        if self.tty:
            count = f" {done}/{total}" if total > 1 else ""
            times = f"{elapsed:.1f}s" + (f", {left}" if left else "")
            line = f"{self._bar(fraction)} {fraction:4.0%}  {label}{count}  {times}  {message}"
            self._write("\r" + line[: max(self.columns - 1, 20)] + "\x1b[K")
            self.open_line = True
        elif done >= total and total:
            note = f" ({left})" if left else ""
            detail = f" — {message}" if message else ""
            self._write(f"{elapsed:7.1f}s {fraction:4.0%}  {label}: done{detail}{note}\n")
        self.last_step = step

    def finish(self, seconds: float) -> None:
        """The last line: the whole run done, in `seconds` (the same figure the summary shows)."""
        if self.quiet:
            return
        self.fraction = 1.0
        if self.tty:
            self._write(f"\r{self._bar(1.0)} 100%  Done  {seconds:.1f}s\x1b[K\n")
        else:
            self._write(f"{seconds:7.1f}s 100%  Done\n")
        self.open_line = False

    def end_line(self) -> None:
        """End the terminal's updating line so the next output starts on a fresh one."""
        if self.open_line and not self.quiet:
            self._write("\n")
        self.open_line = False


def default_out(path: Path) -> Path:
    name = path.name
    for suffix in (".gz", ".gzip", ".bz2", ".xz"):
        name = name.removesuffix(suffix)
    return Path("iterate-out") / (Path(name).stem or "dataset")


def proof(issue: Issue) -> str:
    """What the summary says of an issue's proof: every issue has a word, none is left blank."""
    from iterate.contracts import READ_LEVEL_TYPES

    investigation = issue.investigation
    if investigation is None:
        # The reader's own findings (ragged rows, blank or repeated header names) are facts of the parse.
        return "seen on read" if issue.type in READ_LEVEL_TYPES else "not investigated"
    if not investigation.success:
        return "proof failed"
    return "proven" if issue.status == "confirmed" else issue.status


def instructions_note(result: AnalysisResult) -> str | None:
    """What became of --instructions, when some were given: offline agents do not read them."""
    run = result.run
    if run is None or not run.instructions:
        return None
    if result.mode == "offline":
        return "instructions: not used offline (only Claude reads them; set ANTHROPIC_API_KEY) — kept in analysis.json"
    if result.mode == "degraded":
        return "instructions: read by Claude; the steps that fell back offline did not use them"
    return "instructions: read by Claude"


def program() -> str:
    """This program as the shell that started it can start it again: `iterate` when PATH finds this one,
    else the path it was started by (`.venv/bin/iterate` from a checkout), or `python -m iterate`."""
    started = sys.argv[0] if sys.argv else ""
    if Path(started).name == "__main__.py":
        return f"{shlex.quote(sys.executable)} -m iterate"
    if Path(started).name != "iterate":
        return "iterate"
    found = shutil.which("iterate")
    if found and Path(found).resolve() == Path(started).resolve():
        return "iterate"
    return shlex.quote(started)


def summary_text(
    result: AnalysisResult,
    out: Path,
    *,
    width: int = 100,
    seconds: float | None = None,
    command: str = "iterate",
) -> str:
    """The one-screen summary: dataset, mode, issues by severity, the top issues, where the files are, and
    the command to try next (a follow-up on the top issue, written so it runs when pasted).

    `seconds`: the whole command's time so far (what the progress display ends on); the run's own
    `durationMs` when not given. `command`: how to call the program again (`program()`)."""
    run = result.run
    counts = Counter(i.severity for i in result.issues)
    lines = []
    if run is not None:
        took = seconds if seconds is not None else run.durationMs / 1000
        lines.append(
            f"{visible(run.datasetName)}: {run.rowCount:,} rows × {run.columnCount} columns, {took:.1f}s"
        )
    reasons = visible("; ".join(run.degradedReasons[:2])) if run and run.degradedReasons else ""
    mode = result.mode + (f" ({reasons})" if reasons else "")
    lines.append(f"mode: {mode}"[:width])
    note = instructions_note(result)
    if note:
        lines.append(note[:width])
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
    handles = short_ids(i.id for i in result.issues)
    sampled = False
    for issue in ranked[:10]:
        share = f"{issue.evidence.affectedShare:.1%}" if issue.evidence else ""
        # a header name with a newline or an escape sequence must not break the line nor act
        cols = visible(", ".join(issue.affectedColumns[:3]) + ("…" if len(issue.affectedColumns) > 3 else ""))
        n_rows = issue.evidence.affectedRows if issue.evidence else issue.affectedRows
        rows = f"{n_rows:,} row{'' if n_rows == 1 else 's'}" if n_rows is not None else ""
        if issue.evidence is not None and issue.evidence.sampleRows is not None:
            rows = f"{n_rows:,} of {issue.evidence.sampleRows:,}"  # a sample's count, its share of the sample
            sampled = True
        kind = visible(issue.type)
        # the column names last: on a narrow terminal they are what gets cut, never the proof status
        status = visible(proof(issue))
        if issue.accepted is not None:  # still listed, so a reader sees what the gate lets pass
            status = "accepted, grew" if issue.accepted.grown else "accepted"
        # the short handle `followup`, `fix` and `accept` take in place of the id (iterate.issueref)
        handle = handles[issue.id]
        line = (
            f"  {handle:<7} {issue.severity:<6} {kind[:22]:<22} {rows:>12} {share:>6}  {status:<16}  {cols}"
        )
        lines.append(line.rstrip()[:width])
    if len(result.issues) > 10:
        lines.append(f"  … and {len(result.issues) - 10} more in the report")
    if sampled:
        lines.append(
            "'N of S': counted on a sample of S rows only (the report says why), not over all rows"[:width]
        )
    if result.issues:
        lines.append("first column: the issue's handle (iterate followup, fix, accept take it)"[:width])
    if result.comparison is not None:
        lines.append(comparison_line(result.comparison))
    if run is not None and run.expectedBlanks:
        blanks = ", ".join(f"{n:,} in {visible(c)}" for c, n in list(run.expectedBlanks.items())[:3])
        more = ", …" if len(run.expectedBlanks) > 3 else ""
        lines.append(f"blanks your fix left on purpose, not reported as missing: {blanks}{more}"[:width])
    accepted = [i for i in result.issues if i.accepted is not None]
    if accepted:
        grown = sum(1 for i in accepted if i.accepted is not None and i.accepted.grown)
        lines.append(
            f"accepted: {len(accepted)} issue{'s' if len(accepted) != 1 else ''} (iterate accept)"
            + (f", {grown} grew since accepted" if grown else "")
        )
    lines.append(f"report:   {visible(out / 'report.html')}")
    lines.append(f"analysis: {visible(out / 'analysis.json')}")
    lines.append(f"flags:    {visible(out / 'flags.csv')}")
    if ranked:
        # never cut to the width: a cut command would not run when pasted
        lines.append(f"next:     {command} followup {shlex.quote(visible(out))} {handles[ranked[0].id]}")
    return "\n".join(lines)


def comparison_line(comparison: RunComparison) -> str:
    """How this run's issues differ from the previous run's, in one line (analysis.json's `comparison`)."""
    parts = [f"{comparison.new} new", f"{len(comparison.resolved)} resolved"]
    if comparison.regressed:
        parts.append(f"{comparison.regressed} affecting more rows")
    if comparison.improved:
        parts.append(f"{comparison.improved} affecting fewer rows")
    parts.append(f"{comparison.persisting} unchanged")
    return "since the last run of this file: " + ", ".join(parts)


def _one_line(text: str) -> str:
    """Free text (an exception's message) on one line, whitespace collapsed, controls made visible."""
    return visible(" ".join(str(text).split()))


def _error(message: str) -> int:
    print(f"iterate: error: {message}", file=sys.stderr)
    return 2


def read_stdin(target: Path, limits: ReadLimits, stream: BinaryIO | None = None) -> Path:
    """Copy what comes on stdin into `target` (the reader needs a file it can read twice and seek in),
    refusing it past ITERATE_MAX_FILE_BYTES as a file of that size would be."""
    from iterate.io.limits import refuse, size_text

    source = stream if stream is not None else sys.stdin.buffer
    written = 0
    with target.open("wb") as fh:
        while chunk := source.read(1 << 20):
            written += len(chunk)
            if written > limits.max_file_bytes:
                raise refuse(
                    target,
                    "max_file_bytes",
                    limits.max_file_bytes,
                    written,
                    f"sent more than the {size_text(limits.max_file_bytes)} allowed",
                    advice="split the data and analyze the parts",
                )
            fh.write(chunk)
    return target


def run(args: argparse.Namespace) -> int:
    """Run the analysis; 0 when it ran (whatever it found), 2 on unreadable input or settings, 1 otherwise."""
    from pydantic import ValidationError

    from iterate.accepted import AcceptError
    from iterate.cli.rundir import INPUT_DIR, RunDirError, claim
    from iterate.io import DatasetReadError, ReadLimits, check_source
    from iterate.pipeline import run_local
    from iterate.settings import Settings, invalid_settings

    started = getattr(args, "started", None)
    try:
        settings = Settings.from_env()
    except ValidationError as exc:
        return _error(
            f"invalid setting in the environment: {invalid_settings(exc.errors())} — fix or unset it"
        )
    if getattr(args, "workers", None) is not None:
        settings = settings.model_copy(update={"workers": args.workers})
    weights = LLM_WEIGHTS if settings.anthropic_api_key else OFFLINE_WEIGHTS
    progress = Progress(sys.stderr, quiet=args.quiet, started=started, weights=weights)
    limits = ReadLimits.from_settings(settings)
    with contextlib.ExitStack() as scratch:
        if args.file == STDIN:
            if sys.stdin is None or sys.stdin.isatty():
                return _error(
                    "- reads the data from stdin, which is a terminal — pipe a file in: "
                    "iterate analyze - < orders.csv"
                )
            name = args.name or "stdin"
            if name in (".", "..") or any(ch in name for ch in "/\\\0") or not name.strip():
                return _error(f"--name {visible(name)}: give a plain file name, e.g. orders.csv")
            spool = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="iterate-stdin-")))
            try:
                path = read_stdin(spool / name, limits)
            except DatasetReadError as exc:
                return _error(visible(exc))
        else:
            if args.name:
                return _error("--name names data read from stdin (-); a file is named by its path")
            path = Path(args.file)
            if not path.exists():
                return _error(f"{visible(path)}: file not found — check the path and try again")
            if path.is_dir():
                return _error(f"{visible(path)}: is a directory — give one data file")
            try:  # a FIFO, a device or a file over the size limit is refused before anything starts
                check_source(path, limits)
            except DatasetReadError as exc:
                return _error(visible(exc))
        if args.out:
            out = Path(args.out)
        elif args.json:  # stdout is the product: the files go with the command
            out = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="iterate-json-"))) / "run"
        else:
            out = default_out(path)
        try:
            acceptances = _acceptances(args.accepted, None if args.file == STDIN else path.parent)
        except AcceptError as exc:
            return _error(visible(exc))
        stdin = args.file == STDIN
        try:
            copy = out / INPUT_DIR / path.name if stdin else None
            claimed = claim(out, path.name, None if stdin else path.resolve(), input_copy=copy)
            if copy is not None:  # kept beside the run: `iterate fix` reads it as it reads a file's path
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(path, copy)
                path = copy
        except RunDirError as exc:
            return _error(visible(exc))
        except OSError as exc:
            return _error(
                f"{visible(out)}: cannot be used ({visible(exc.strerror or exc)}) — give another --out"
            )
        unnamed_rerun = stdin and not args.name and claimed.previous_issues is not None
        if unnamed_rerun:
            # Unnamed data from stdin may be any table: comparing it with the last one would call that
            # table's issues "resolved". Only a named stdin run is compared (with the same name's last run).
            claimed = replace(claimed, previous_issues=None)
        if not args.quiet:
            if unnamed_rerun:
                print(
                    f"iterate: replacing the previous stdin run in {visible(out)}, not compared with it "
                    "(name the data with --name to compare runs of it)",
                    file=sys.stderr,
                )
            elif claimed.replaced is not None:
                print(
                    f"iterate: replacing the previous run of {visible(claimed.replaced)} in {visible(out)}"
                    " (this run is compared with it)",
                    file=sys.stderr,
                )
            if args.instructions and not settings.anthropic_api_key:
                print(
                    "iterate: note: --instructions changes nothing offline (no ANTHROPIC_API_KEY): only Claude"
                    " reads them; they are kept in analysis.json",
                    file=sys.stderr,
                )
        try:
            result = run_local(
                path,
                out,
                instructions=args.instructions,
                settings=settings,
                progress=progress,
                previous_issues=claimed.previous_issues,
                started_clock=progress.started,
                accepted=acceptances,
            )
        except DatasetReadError as exc:
            progress.end_line()
            return _error(visible(exc))  # one line, with the file's name as it is
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
        seconds = progress.elapsed()
        progress.finish(seconds)
        if args.json:
            written = out / "analysis.json"
            # the file's text when it exists, so `--json` and the file never disagree; JSON escapes C0
            # controls itself, and the ones it leaves raw (C1, bidi) are written as escapes of the same value
            text = (
                written.read_text(encoding="utf-8") if written.is_file() else result.model_dump_json(indent=2)
            )
            print(json_visible(text))
        elif not args.quiet:
            width = max(shutil.get_terminal_size((100, 24)).columns, 60)
            print(summary_text(result, out, width=width, seconds=seconds, command=program()))
    failing = gate_failures(result.issues, args.fail_on)
    waived = len(gate_failures(result.issues, args.fail_on, accepted=True))
    if waived and not args.quiet:
        n = waived
        print(
            f"iterate: gate: {n:,} accepted issue{'s' if n != 1 else ''} at {args.fail_on} severity or above "
            "not counted (see iterate accept)",
            file=sys.stderr,
        )
    if failing:
        print(
            f"iterate: gate: {len(failing):,} issue{'s' if len(failing) != 1 else ''} at {args.fail_on} "
            f"severity or above (--fail-on {args.fail_on}), e.g. {visible(failing[0].id)}",
            file=sys.stderr,
        )
        return EXIT_GATE
    return 0
