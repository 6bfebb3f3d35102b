"""`python -m iterate` runs the command line."""

import sys

from iterate.cli import entry

sys.exit(entry())
