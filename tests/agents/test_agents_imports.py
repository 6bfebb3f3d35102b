"""The LLM functions stay small: building the Claude agents loads neither pandas nor the anthropic SDK yet."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

PROBE = """
import sys
from iterate.agents import build_agents
from iterate.settings import Settings
agents = build_agents(Settings(anthropic_api_key="k"))
import iterate.cli.followup_cmd, iterate.llm.anthropic
print(sorted(m for m in ("pandas", "numpy", "pyarrow", "anthropic") if m in sys.modules))
"""


def test_the_llm_side_imports_no_pandas_and_defers_the_sdk():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
