"""Two public dirty benchmark tables (../shared/datasets): the real engines fail exactly the checks that encode
the confirmed issues Iterate found there (their clean twins differ in more than those issues, so only the dirty
side is run)."""

from __future__ import annotations

from pathlib import Path

import engines
import pytest

from iterate.cli.main import main as iterate_main
from iterate.export import derive, load_run, render
from iterate.export.render import soda_name, soda_table

DATASETS = Path(__file__).parent.parent.parent.parent / "shared" / "datasets"


@pytest.mark.engines
@pytest.mark.parametrize("name", ["hospital", "beers"])
def test_engines_fail_exactly_the_encoded_checks_on_a_benchmark(name: str, tmp_path: Path) -> None:
    dirty = DATASETS / name / "dirty.csv"
    if not dirty.exists():
        pytest.skip(f"{dirty} is not there (shared/ sits beside the repository)")
    assert iterate_main(["analyze", str(dirty), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    profile, analysis = load_run(tmp_path / "run")
    rules = derive(profile, analysis, tmp_path / "run")
    numeric = {c.name: k for c in rules.columns if (k := rules.numeric(c.name))}
    for fmt in ("gx", "soda"):
        rendered = render(rules, fmt)
        path = tmp_path / f"rules.{fmt}"
        path.write_text(rendered.text, encoding="utf-8")
        keys = {(c.id if fmt == "gx" else soda_name(c)): c for c in rendered.checks}
        (res,) = engines.run(fmt, path, [dirty], rules.null_values, numeric, soda_table(rules.dataset))
        assert res["errors"] == []
        assert set(res["results"]) == set(keys)
        failed = {keys[k].id for k, v in res["results"].items() if v == "fail"}
        assert failed == {c.id for c in rendered.checks if c.issues}, fmt
        assert len(failed) >= 10
