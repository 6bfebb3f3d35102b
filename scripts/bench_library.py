"""Script-library benchmark: investigation tokens of a first LLM-mode run, an unchanged rerun, and new rows.

The real anthropic SDK talks to the local fake Messages server the tests use (tests/llm/fake_anthropic.py),
whose model reads its prompt and writes code that recomputes each claim (tests/llm/claude_models.py); token
counts are the server's estimate of each request and answer. Every run gets an empty response cache of its
own, so a cached answer never stands in for a reused script: what the second and third runs save is the
library's doing. Two modes: `templates` (the default product: detector issues are proven by the engine's
free templates, Claude writes code for its own hypotheses and for retries) and `claude` (Claude writes every
investigation: what the library saves when investigations are the LLM's).

    .venv/bin/python scripts/bench_library.py [--rows 300] [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "samples" / "orders.csv"


def with_new_rows(source: Path, dest: Path, *, rows: int = 300, seed: int = 7) -> None:
    """The same file with `rows` new orders appended: existing customers and products (problems and all, as
    they recur), a new order id each, dated after the last order. Same columns, same types."""
    table = list(csv.reader(source.open(newline="", encoding="utf-8")))
    header, body = table[0], table[1:]
    order_id, order_date = header.index("order_id"), header.index("order_date")
    rng = random.Random(seed)
    new = []
    for k in range(rows):
        row = list(rng.choice(body))
        row[order_id] = f"SO-{200001 + k}"
        row[order_date] = f"2026-11-{1 + k % 28:02d}"
        new.append(row)
    with dest.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([header, *body, *new])


def _tokens(usage: Any) -> int:
    if usage is None:
        return 0
    return int(usage.inputTokens + usage.outputTokens + usage.cacheReadTokens + usage.cacheWriteTokens)


def run_once(data: Path, out: Path, *, library: Path, cache: Path, prefer_templates: bool) -> dict[str, Any]:
    """One `iterate analyze` in LLM mode against a fresh fake server; its investigation tokens and reuse."""
    sys.path.insert(0, str(REPO / "tests" / "llm"))
    from claude_models import reading_claude
    from fake_anthropic import FakeAnthropic

    from iterate.agents import build_agents
    from iterate.pipeline import run_local
    from iterate.settings import Settings

    with FakeAnthropic(default=reading_claude) as fake:
        settings = Settings(
            anthropic_api_key="bench-key", anthropic_base_url=fake.url, script_library=str(library)
        )
        agents = build_agents(settings, prefer_templates=prefer_templates, cache_dir=cache)
        result = run_local(data, out, settings=settings, agents=agents)
        code_requests = fake.tool_names().count("run_python")
    usage = result.run.usage if result.run else {}
    investigated = [i for i in result.issues if i.investigation is not None]
    return {
        "mode": result.mode,
        "investigation_tokens": _tokens(usage.get("investigation")),
        "total_tokens": _tokens(usage.get("total")),
        "code_requests": code_requests,
        "investigations": len(investigated),
        "by_llm_code": sum(1 for i in investigated if i.investigation and i.investigation.source == "llm"),
        "reused": sum(1 for i in investigated if i.investigation and i.investigation.reused is not None),
        "proven": sum(1 for i in investigated if i.status in {"confirmed", "unverified"}),
    }


def measure(work: Path, *, prefer_templates: bool, rows: int = 300) -> dict[str, Any]:
    """First run, unchanged rerun, and a rerun with `rows` new rows, sharing one library (one file path)."""
    work.mkdir(parents=True, exist_ok=True)
    data = work / "orders.csv"
    shutil.copyfile(SAMPLE, data)
    library = work / "library"

    def run(n: int) -> dict[str, Any]:
        return run_once(
            data,
            work / f"out{n}",
            library=library,
            cache=work / f"cache{n}",
            prefer_templates=prefer_templates,
        )

    first = run(1)
    unchanged = run(2)
    with_new_rows(SAMPLE, data, rows=rows)
    grown = run(3)
    base = max(first["investigation_tokens"], 1)
    return {
        "first": first,
        "unchanged": unchanged,
        "new_rows": grown,
        "new_rows_share": round(grown["investigation_tokens"] / base, 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=300, help="new rows appended for the third run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-library-") as tmp:
        for mode, prefer in (("templates", True), ("claude", False)):
            results[mode] = measure(Path(tmp) / mode, prefer_templates=prefer, rows=args.rows)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print("investigation tokens (input + output + cache), samples/orders.csv, LLM mode on the fake server")
    print(
        f"{'mode':<10} {'first run':>10} {'unchanged':>10} {'new rows':>10} {'share':>7}  reused (unchanged/new)"
    )
    for mode, r in results.items():
        print(
            f"{mode:<10} {r['first']['investigation_tokens']:>10,} {r['unchanged']['investigation_tokens']:>10,}"
            f" {r['new_rows']['investigation_tokens']:>10,} {r['new_rows_share']:>7.1%}"
            f"  {r['unchanged']['reused']}/{r['new_rows']['reused']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
