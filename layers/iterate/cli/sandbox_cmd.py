"""`iterate sandbox run --data FILE --code CODE.py`: try an investigation script by hand in the sandbox."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from iterate.visible import visible

EXIT_STOPPED = 3
EXIT_BAD_INPUT = 2


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sandbox",
        help="run investigation code in the sandbox",
        description="Run untrusted investigation code against a dataset in Iterate's sandbox.",
    )
    commands = p.add_subparsers(dest="sandbox_command", metavar="COMMAND")
    run_parser = commands.add_parser(
        "run",
        help="run CODE.py against FILE and print the CodeInvestigation JSON",
        description=(
            "Runs CODE.py in the sandbox with the dataset as a pandas DataFrame `df` of text columns (`pd`, "
            "`np` and `json` are there too). The code sets `result` to a JSON-serialisable dict, or prints "
            'exactly one JSON object; what it prints beside a `result` comes back as "printed". Prints '
            'the CodeInvestigation JSON ("source": "user"); exits 0 on success, 3 when the code was '
            "stopped or failed, 2 when FILE or CODE.py cannot be used. Defaults: ITERATE_SANDBOX_TIMEOUT_S, "
            "ITERATE_SANDBOX_MEMORY_MB."
        ),
    )
    run_parser.add_argument(
        "--data", required=True, type=Path, metavar="FILE", help="any file `iterate analyze` reads"
    )
    run_parser.add_argument("--code", required=True, type=Path, metavar="CODE.py", help="the script to run")
    run_parser.add_argument(
        "--timeout", type=_positive(float), metavar="S", help="seconds the code may run (wall clock and CPU)"
    )
    run_parser.add_argument(
        "--memory-mb",
        type=_positive(int),
        metavar="N",
        help="memory budget of the code and its processes, MB",
    )
    run_parser.add_argument(
        "--no-namespaces",
        action="store_true",
        help="skip Linux namespaces (as on Lambda); the other layers stay",
    )
    run_parser.add_argument("--verbose", action="store_true", help="also print the isolation used, on stderr")
    run_parser.set_defaults(func=run)
    p.set_defaults(func=lambda args: (p.print_help(), EXIT_BAD_INPUT)[1])


def _positive(kind: type[float] | type[int]) -> Any:
    """An argparse type: a number above zero (a zero or negative budget stopped every script, misreported)."""

    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above zero, got {text}")
        return value

    return parse


def _as_parquet(data: Path, scratch: Path) -> Path:
    """Parquet files go to the sandbox as they are; anything else is read by the engine's reader first."""
    if data.suffix.lower() in (".parquet", ".pq"):
        return data
    from iterate.io import ReadLimits, read_table, write_parquet_text
    from iterate.settings import Settings

    limits = ReadLimits.from_settings(Settings.from_env())
    return write_parquet_text(read_table(data, limits=limits), scratch / "data.parquet")


def run(args: argparse.Namespace) -> int:
    from iterate.investigate.projection import frame_columns
    from iterate.io import DatasetReadError, ReadLimits, check_source
    from iterate.ports import DatasetRef
    from iterate.sandbox import LocalSandbox, SandboxLimits
    from iterate.settings import Settings

    if not args.code.is_file():
        print(f"iterate sandbox: code file not found: {visible(args.code)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not args.data.exists():
        print(f"iterate sandbox: data file not found: {visible(args.data)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:  # a FIFO, a device, or over the size limit: refused before anything opens it
        check_source(args.data, ReadLimits.from_settings(Settings.from_env()))
    except DatasetReadError as exc:
        print(f"iterate sandbox: {visible(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    overrides: dict[str, Any] = {}
    if args.timeout is not None:
        overrides["timeout_s"] = args.timeout
    if args.memory_mb is not None:
        overrides["memory_mb"] = args.memory_mb
    if args.no_namespaces:
        overrides["namespaces"] = False
    limits = SandboxLimits.from_settings(Settings.from_env(), **overrides)
    code = args.code.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="iterate-sandbox-cli-") as scratch:
        try:
            parquet = _as_parquet(args.data, Path(scratch))
        except DatasetReadError as exc:
            print(f"iterate sandbox: {visible(exc)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        # Only the columns the code names are loaded when its syntax shows it reads no other.
        dataset = DatasetRef(path=str(parquet), columns=frame_columns(code) or None)
        outcome = LocalSandbox(limits).run_detailed(code, dataset)
    # The person running this wrote the code: never labelled as the engine's template (which is trusted).
    investigation = outcome.investigation.model_copy(update={"source": "user"})
    print(json.dumps(investigation.model_dump(mode="json"), indent=2))
    if args.verbose:
        print(json.dumps({"isolation": outcome.isolation, "violations": outcome.violations}), file=sys.stderr)
    return 0 if investigation.success else EXIT_STOPPED
