"""`python -m iterate` runs the command line."""

from iterate.cli import entry

entry()
