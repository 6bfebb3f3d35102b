"""`iterate` entry point: one subcommand module each (analyze, sandbox, followup), registered here."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

from iterate.visible import visible

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

# Each module exposes `register(subparsers)`, which adds its parser and sets `func(args) -> int`.
SUBCOMMANDS = (
    "iterate.cli.analyze",
    "iterate.cli.sandbox_cmd",
    "iterate.cli.followup_cmd",
    "iterate.cli.export_cmd",
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
