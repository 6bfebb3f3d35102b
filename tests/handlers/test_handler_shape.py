"""Handlers stay thin: they import only the engine, Powertools and pydantic, and their body is a few lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
MINE = (
    "profile", "understand", "analyze", "investigate", "report", "record_failure", "api", "followup", "fix",
    "fix_worker",
)  # fmt: skip
ALLOWED_ROOTS = {"__future__", "functools", "typing", "iterate", "aws_lambda_powertools", "pydantic"}


def _imports(tree: ast.AST) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module)
    return roots


@pytest.mark.parametrize("name", MINE)
def test_handler_is_glue_over_the_engine(name: str) -> None:
    # Given a function's handler source
    tree = ast.parse((REPO / "functions" / name / "handler.py").read_text(encoding="utf-8"))
    # Then it imports no boto3, pandas or anthropic (those live behind the engine's factories and ports)
    assert {module.split(".")[0] for module in _imports(tree)} <= ALLOWED_ROOTS
    # And its lambda_handler is a few statements of glue
    (handler,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "lambda_handler"]
    assert len(handler.body) <= 4
    assert ast.get_docstring(tree), "one-line module docstring"


def test_engine_runtime_never_imports_handlers_or_infra() -> None:
    # Given the engine's AWS and API modules
    for path in [
        *(REPO / "layers" / "iterate" / "aws").glob("*.py"),
        *(REPO / "layers" / "iterate" / "api").glob("*.py"),
    ]:
        imported = _imports(ast.parse(path.read_text(encoding="utf-8")))
        # Then imports flow one way: handler → engine → ports, never back to functions/ or infra/
        assert not any(m.split(".")[0] in {"functions", "infra", "aws_cdk"} for m in imported), path
        assert "pandas" not in {m.split(".")[0] for m in imported}, (
            f"{path} must stay light for the LLM functions"
        )
