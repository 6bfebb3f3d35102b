"""Which path a run takes: the single pass, or the engine (no import of the engine's own dependencies here)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iterate.settings import Settings

# What the engine path reads: delimited text (DuckDB's CSV reader). Other formats keep the single pass.
ENGINE_FORMATS = {".csv", ".tsv", ".tab", ".txt"}


def routes_to_engine(path: str | Path, settings: Settings) -> bool:
    """Whether `iterate analyze` runs this input on the engine path: `settings.engine` "always" or "never", or
    ("auto") a delimited text file of `settings.engine_bytes` or more. Other formats keep the single pass."""
    p = Path(path)
    if str(path) == "-" or settings.engine == "never" or p.suffix.lower() not in ENGINE_FORMATS:
        return False
    if settings.engine == "always":
        return True
    try:
        return p.stat().st_size >= settings.engine_bytes
    except OSError:
        return False
