"""The pass/fail matrix of `iterate export`: each exported check run by the real engine on the dirty orders file
and on its hand-corrected twin. `python tests/export/matrix.py [gx|soda ...]` prints it as a Markdown table.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import engines
import orders

from iterate.cli.main import main as iterate_main
from iterate.export import derive, load_run, render
from iterate.export.render import soda_name
from iterate.export.rules import Check, RuleSet


@dataclass
class Row:
    check: str
    issues: tuple[str, ...]
    dirty: str
    clean: str
    level: str = "fail"


def analyse(workdir: Path) -> tuple[Path, Path, Path]:
    """(run dir of the dirty file, dirty csv, clean csv): the dirty file analysed by the real engine, offline."""
    dirty = orders.write(workdir / "orders_dirty.csv", orders.dirty_rows())
    clean = orders.write(workdir / "orders_clean.csv", orders.clean_rows())
    run_dir = workdir / "run"
    code = iterate_main(["analyze", str(dirty), "--out", str(run_dir), "--quiet"])
    if code != 0:
        raise RuntimeError(f"iterate analyze exited {code}")
    return run_dir, dirty, clean


def rules_of(run_dir: Path) -> RuleSet:
    profile, analysis = load_run(run_dir)
    return derive(profile, analysis, run_dir)


def run_checks(
    run_dir: Path, engine: str, files: list[Path], workdir: Path, table: str = "orders_dirty"
) -> tuple[list[Check], list[dict[str, str]], list[str]]:
    """The run's checks exported for `engine` (gx, soda, or soda-typed: Soda on a table DuckDB typed itself),
    run on each file: (the checks written, per file {check id: pass | fail | warn | missing}, engine errors)."""
    fmt = "gx" if engine == "gx" else "soda"
    rules = rules_of(run_dir)
    rendered = render(rules, fmt, table=table)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"rules.{fmt}"
    path.write_text(rendered.text, encoding="utf-8")
    numeric = {c.name: kind for c in rules.columns if (kind := rules.numeric(c.name))}
    results = engines.run(engine, path, files, rules.null_values, numeric, table)
    outcomes = []
    for on_file in results:
        got = on_file["results"]
        outcomes.append(
            {c.id: got.get(c.id if fmt == "gx" else soda_name(c), "missing") for c in rendered.checks}
        )
    return rendered.checks, outcomes, [e for r in results for e in r["errors"]]


def export_job(
    run_dir: Path, engine: str, csv: Path, workdir: Path, table: str = "t"
) -> tuple[list[Check], dict]:
    """The run's checks exported for `engine`, and the job that runs them on `csv` (engines.run_batch)."""
    fmt = "gx" if engine == "gx" else "soda"
    rules = rules_of(run_dir)
    rendered = render(rules, fmt, table=table)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"rules.{fmt}"
    path.write_text(rendered.text, encoding="utf-8")
    numeric = {c.name: kind for c in rules.columns if (kind := rules.numeric(c.name))}
    job = {"engine": engine, "rules": str(path), "csv": str(csv), "nulls": rules.null_values}
    return rendered.checks, job | {"numeric": numeric, "table": table}


def outcome(engine: str, checks: list[Check], result: dict) -> dict[str, str]:
    """{check id: pass | fail | warn | missing} from one engine result."""
    got = result["results"]
    return {c.id: got.get(c.id if engine == "gx" else soda_name(c), "missing") for c in checks}


def matrix(
    fmt: str, run_dir: Path, dirty: Path, clean: Path, workdir: Path, engine: str | None = None
) -> tuple[list[Row], list[str]]:
    """One row per exported check with its outcome on both files; and any error the engine logged."""
    checks, (on_dirty, on_clean), errors = run_checks(run_dir, engine or fmt, [dirty, clean], workdir)
    rows = [Row(c.id, c.issues, on_dirty[c.id], on_clean[c.id], c.level) for c in checks]
    return rows, errors


def markdown(fmt: str, rows: list[Row]) -> str:
    lines = [f"| {fmt} check | level | encodes | dirty | clean |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| `{r.check[:70]}` | {r.level} | {', '.join(r.issues) or '—'} | {r.dirty} | {r.clean} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    fmts = sys.argv[1:] or ["gx", "soda"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        run_dir, dirty, clean = analyse(work)
        print(json.dumps(engines.versions()))
        for fmt in fmts:
            rows, errors = matrix(fmt, run_dir, dirty, clean, work)
            print(markdown(fmt, rows))
            print("errors:", errors)
