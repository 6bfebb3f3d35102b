"""The `iterate` command line."""

from iterate.cli.main import main

__all__ = ["main"]
