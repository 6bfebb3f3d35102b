"""The command runs on the runtime dependencies alone: nothing of the AWS, LLM, CDK or dev extras is imported.

`make demo` and `pip install .` install only `[project.dependencies]`; these tests run the real commands
with every module of the extras made unimportable, so a stray top-level `import boto3` fails here.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "orders.csv"

# Import names of what the extras install (pyproject.toml: llm, aws, infra, test, lint).
EXTRAS_MODULES = (
    "anthropic",
    "boto3",
    "botocore",
    "aws_lambda_powertools",
    "aws_xray_sdk",
    "aws_cdk",
    "constructs",
    "cdk_nag",
    "cfnlint",
    "jsii",
    "moto",
    "mypy",
    "statsmodels",
    "scipy",
)

BLOCKED_RUN = """
import sys
BLOCKED = set(sys.argv[1].split(","))

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"{name} is blocked: not a runtime dependency", name=name)
        return None

sys.meta_path.insert(0, Block())
from iterate.cli import main
code = main(sys.argv[2:])
sys.stdout.flush()
sys.exit(code)
"""


def run_blocked(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env_free = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}  # no ANTHROPIC_API_KEY: the offline path
    return subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN, ",".join(EXTRAS_MODULES), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env_free,
        timeout=300,
    )


def test_the_runtime_set_holds_none_of_the_extras():
    # Given the project's runtime dependencies
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime = {d.split(">")[0].split("=")[0].split("[")[0].strip().lower() for d in project["dependencies"]}
    # Then none of the heavy toolchains is among them, and every one of them sits in an extra
    assert runtime.isdisjoint({"boto3", "anthropic", "aws-cdk-lib", "moto", "mypy", "aws-lambda-powertools"})
    extras = " ".join(" ".join(v) for v in project["optional-dependencies"].values())
    for dist in ("boto3", "anthropic", "aws-cdk-lib", "constructs", "moto", "mypy", "aws-lambda-powertools"):
        assert dist in extras, dist


def test_analyze_followup_and_sandbox_run_with_the_extras_blocked(tmp_path):
    # Given no module of the extras can be imported
    out = tmp_path / "run"
    # When the whole offline analysis runs
    done = run_blocked("analyze", str(SAMPLE), "--out", str(out), cwd=tmp_path)
    # Then it succeeds and writes its files
    assert done.returncode == 0, done.stderr
    assert (out / "report.html").is_file() and (out / "flags.csv").is_file()
    # And the follow-up conversation and a hand-run sandbox script work too
    issue = json.loads((out / "analysis.json").read_text())["issues"][0]["id"]
    asked = run_blocked("followup", str(out), issue, cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr
    script = tmp_path / "count.py"
    script.write_text("result = {'rows': len(df)}\n")
    ran = run_blocked("sandbox", "run", "--data", str(SAMPLE), "--code", str(script), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["output"] == {"rows": 1503}


def test_the_blocker_itself_works(tmp_path):
    # A check that cannot fail proves nothing: the same harness refuses an extra's module.
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN.replace("from iterate.cli import main", "import boto3"), "boto3"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode != 0 and "boto3 is blocked" in done.stderr


def test_the_sandbox_worker_imports_none_of_the_extras():
    # The sandbox's processes run in their own isolated interpreter (python -I worker.py), out of reach of
    # the blocker above: worker.py and every module it loads (relative imports only, never the engine).
    sandbox = REPO / "layers" / "iterate" / "sandbox"
    files = [sandbox / "worker.py", *sorted(sandbox.glob("confine/*.py"))] + [
        sandbox / f"{name}.py"
        for name in ("zygote", "loader", "supervisor", "runner", "runcode", "batch", "frames", "inprocess")
    ]
    for path in files:
        tree = ast.parse(path.read_text())
        imported = {
            (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            and not (isinstance(node, ast.ImportFrom) and node.level)
            for alias in node.names
        }
        assert imported.isdisjoint(EXTRAS_MODULES), (path.name, imported & set(EXTRAS_MODULES))
        assert "iterate" not in imported, path.name
