"""The real engines for the export tests: a venv of its own (.venv-engines), built once and reused.

GX Core and Soda Core install from PyPI; they cannot share .venv (soda-core's typeguard 4 breaks jsii), so the
first test that needs them builds `.venv-engines/` at the repository root (~1.5-2 min on a fresh machine),
under a file lock so pytest-xdist workers build it once, and every later run reuses it while the pinned
requirements are unchanged.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
REQUIREMENTS = HERE / "engines-requirements.txt"
VENV = Path(os.environ.get("ITERATE_ENGINES_VENV", ROOT / ".venv-engines"))


def _python() -> Path:
    return VENV / "bin" / "python"


def engine_python() -> Path:
    """The engines' interpreter, building their venv first when it is missing or its requirements changed."""
    stamp = VENV / ".requirements.sha256"
    want = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / ".venv-engines.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == want and _python().exists():
            return _python()
        venv.EnvBuilder(clear=True, with_pip=True).create(VENV)
        subprocess.run(
            [str(_python()), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)],
            check=True,
            timeout=1200,
        )
        stamp.write_text(want)
    return _python()


def versions() -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({p: m.version(p) for p in ('great_expectations', 'soda-core', 'soda-core-duckdb', "
        "'duckdb', 'pandas')}))"
    )
    out = subprocess.run([str(engine_python()), "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def run(
    engine: str,
    rules: Path,
    csv_paths: list[Path],
    null_values: list[str],
    numeric: dict[str, str],
    table: str,
) -> list[dict]:
    """Per file, {"results": {key: "pass" | "fail"}, "errors": [...]} from the real engine (one subprocess:
    importing GX takes seconds)."""
    return _engine(
        [
            engine,
            str(rules),
            json.dumps([str(p) for p in csv_paths]),
            json.dumps(null_values),
            json.dumps(numeric),
            table,
        ]
    )


def run_batch(jobs: list[dict]) -> list[dict]:
    """Each job ({engine, rules, csv, nulls, numeric, table}) run in one engine process, in order."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.json"
        path.write_text(json.dumps(jobs), encoding="utf-8")
        return _engine(["batch", str(path)])


def _engine(args: list[str]) -> list[dict]:
    with tempfile.TemporaryDirectory() as home:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,  # Soda keeps its config (telemetry off) under ~/.soda: a throwaway home
            "GX_ANALYTICS_ENABLED": "false",
            "TQDM_DISABLE": "1",
        }
        proc = subprocess.run(
            [str(engine_python()), str(HERE / "run_engine.py"), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} runner failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(engine_python(), versions(), file=sys.stderr)
