"""The run's human-facing outputs: the self-contained report.html and the flags.csv file."""

from iterate.report.flags import FlagArrays, neutralise, write_flags_csv
from iterate.report.html import render_html

__all__ = ["FlagArrays", "neutralise", "render_html", "write_flags_csv"]
