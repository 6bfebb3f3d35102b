"""Moto fixtures for the handler tests: a fresh AWS world and cold function caches per test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from awsenv import MOTO_CONFIG, base_env, create_resources, reset_caches
from moto import mock_aws


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Given a moto account with the artifacts bucket and the single table, and a function's environment."""
    base_env(monkeypatch)
    with mock_aws(config=MOTO_CONFIG):
        reset_caches()
        yield create_resources()
        reset_caches()
