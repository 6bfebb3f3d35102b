"""`iterate` entry point: one subcommand module each (analyze, sandbox, followup), registered here."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import sys
import time
from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, NoReturn

from iterate.visible import visible

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

# Each module exposes `register(subparsers)`, which adds its parser and sets `func(args) -> int`.
SUBCOMMANDS = (
    "iterate.cli.analyze",
    "iterate.cli.sandbox_cmd",
    "iterate.cli.followup_cmd",
    "iterate.cli.export_cmd",
    "iterate.cli.fix_cmd",
    "iterate.cli.accept_cmd",
    "iterate.cli.delete_cmd",
)


class _Parser(argparse.ArgumentParser):
    """argparse's own messages (usage, errors quoting what was typed) with control characters made visible;
    subcommand parsers are of this class too (argparse builds them with the parent's class)."""

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        super()._print_message(visible(message, keep="\n"), file)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="iterate",
        description=(
            "Iterate finds data-quality problems in a tabular file, proves each one with code run in a "
            "sandbox, explains it and guides the fix. Runs offline with no AWS account and no LLM key; "
            "set ANTHROPIC_API_KEY to let Claude write the explanations and investigations."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from iterate import __version__

    parser.add_argument("--version", action="version", version=f"iterate {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = import_module(name)
        except ModuleNotFoundError as exc:  # a subcommand still being built must not break the others
            if exc.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


# A reader that stopped reading (`iterate analyze f.csv --json | head -2`): what a shell reports for a command
# killed by SIGPIPE (128 + 13), which Python ignores and turns into BrokenPipeError instead.
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()  # the one clock every time shown by a command is read from
    parser = build_parser()
    args = parser.parse_args(argv)
    args.started = started
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        code = func(args)
        sys.stdout.flush()  # a small output is only written here: its broken pipe must be caught here too
    except BrokenPipeError:
        _drop_closed_streams()
        return EXIT_BROKEN_PIPE
    return code


def entry() -> NoReturn:
    """The `iterate` program (console script and `python -m iterate`): main(), then an exit that skips the
    interpreter's teardown.

    - Its final garbage collection over every object the run made took 0.24-0.27 s after the summary was
      printed (the sample, measured three times), time the summary cannot show and the wall clock did.
    - Its C++ static destructors can abort a process that read Parquet ("terminate called without an active
      exception", exit 134, apache/arrow#34314, open upstream): seen once in 47 runs of `iterate accept`,
      after its work was done and printed, which would fail a pipeline gate for nothing.
    The exit handlers still run (the sandbox's finalizers stop what it started), and the streams are flushed.
    """
    exit_now(main())


def exit_now(code: int) -> NoReturn:
    """Run the exit handlers, flush stdout and stderr, and end the process with `code`."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            _drop_closed_streams()
            code = code or EXIT_BROKEN_PIPE
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(code)


def _drop_closed_streams() -> None:
    """Point stdout and stderr at /dev/null, so that the interpreter's final flush of what is still
    buffered for the closed pipe does not print "Exception ignored ... BrokenPipeError" at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


if __name__ == "__main__":
    entry()
