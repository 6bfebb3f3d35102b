"""Shared test fixtures: paths to the repo and to the benchmark datasets beside it."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture(autouse=True)
def _script_library(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's runs store and reuse proofs in a library of their own, never in the user's cache."""
    root = tmp_path_factory.mktemp("script-library")
    monkeypatch.setenv("ITERATE_SCRIPT_LIBRARY", str(root))
    return root
