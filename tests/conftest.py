"""Shared test fixtures: paths to the repo and to the benchmark datasets beside it."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture
def repo_root() -> Path:
    return REPO
