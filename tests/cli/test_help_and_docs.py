"""`--help` and the docs describe the same program: every flag and variable of the help is documented, and
every command line the README and docs/cli.md show is one the program accepts."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from iterate.cli.main import build_parser

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def documentation() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in DOCS)


def parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) for the program and every subcommand, however deep."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*path, name))


def flags() -> list[tuple[str, str]]:
    found = []
    for path, parser in parsers(build_parser()):
        for action in parser._actions:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    found.append((" ".join(("iterate", *path)), option))
    return found


def mentioned(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


@pytest.mark.parametrize(("command", "flag"), flags())
def test_every_flag_in_help_is_documented(command: str, flag: str) -> None:
    assert mentioned(documentation(), flag), f"{command} {flag} is in --help but not in README.md or docs/"


def test_there_are_flags_to_check() -> None:
    # the walk above must reach the subcommands, or the test checks nothing
    commands = {command for command, _ in flags()}
    assert {"iterate analyze", "iterate followup", "iterate sandbox run"} <= commands


def help_texts() -> str:
    texts = []
    for _, parser in parsers(build_parser()):
        texts.append(parser.format_help())
    return "\n".join(texts)


def test_every_variable_named_in_help_is_documented() -> None:
    names = sorted(set(re.findall(r"\b(?:ITERATE|ANTHROPIC)_[A-Z0-9_]+", help_texts())))
    assert names
    missing = [n for n in names if not mentioned(documentation(), n)]
    assert missing == []


# The pages that show command lines: the README's loop (`$I` is .venv/bin/iterate there) and the reference.
COMMAND_PAGES = [REPO / "README.md", REPO / "docs" / "cli.md"]
COMMAND = r"(?:^|\| |&& )(?:(?:\.venv/bin/)?iterate|\$I) (analyze|followup|fix|accept|export|sandbox|--)(.*)$"


def readme_command_lines(pages: list[Path] = COMMAND_PAGES) -> list[list[str]]:
    lines = []
    for page in pages:
        for line in page.read_text(encoding="utf-8").splitlines():
            match = re.search(COMMAND, line)
            if match is None:
                continue
            # a shell's words; `;` ends the command (`...; echo $?`), `#` starts the comment
            lexer = shlex.shlex(line[match.start() :].lstrip("|& "), posix=True, punctuation_chars=";")
            lexer.whitespace_split = True
            words = list(lexer)[1:]  # the program itself
            for end in (">", ";"):
                words = words[: words.index(end)] if end in words else words
            lines.append(words)
    return lines


def test_the_readme_shows_command_lines() -> None:
    assert len(readme_command_lines()) >= 8
    # the front page shows the loop itself, each of its commands
    shown = {argv[0] for argv in readme_command_lines([REPO / "README.md"])}
    assert {"analyze", "followup", "fix", "export", "accept"} <= shown


@pytest.mark.parametrize("argv", readme_command_lines(), ids=" ".join)
def test_every_command_line_in_the_readme_parses(argv: list[str]) -> None:
    # When the README's command line is parsed by the program's own parser
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help and --version exit 0; anything else is a usage error
        assert stop.code == 0, argv
        return
    # Then it names a command the program runs
    assert getattr(args, "func", None) is not None, argv


def test_the_version_flag_prints_the_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "iterate", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.startswith("iterate ")
