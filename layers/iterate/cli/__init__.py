"""The `iterate` command line."""

from iterate.cli.main import entry, main

__all__ = ["entry", "main"]
