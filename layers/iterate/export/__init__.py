"""`iterate export`: a run's profile and confirmed issues as rules for Great Expectations, Soda or Glue DQDL."""

from __future__ import annotations

import json
from pathlib import Path

from iterate.contracts import AnalysisResult, DatasetProfile
from iterate.export.render import FORMATS, Rendered, render
from iterate.export.rules import Check, RuleSet, derive

__all__ = ["FORMATS", "Check", "Rendered", "RuleSet", "derive", "export_run", "load_run", "render"]


def load_run(run_dir: Path) -> tuple[DatasetProfile, AnalysisResult]:
    """The profile and analysis a run wrote (`iterate analyze FILE --out RUN_DIR`)."""
    profile = DatasetProfile.model_validate(
        json.loads((run_dir / "profile.json").read_text(encoding="utf-8"))
    )
    analysis = AnalysisResult.model_validate(
        json.loads((run_dir / "analysis.json").read_text(encoding="utf-8"))
    )
    return profile, analysis


def export_run(run_dir: Path, fmt: str, *, table: str | None = None) -> Rendered:
    """The rules of the run in RUN_DIR, written in `fmt` (gx, soda or dqdl)."""
    profile, analysis = load_run(run_dir)
    return render(derive(profile, analysis, run_dir), fmt, table=table)
