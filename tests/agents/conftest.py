"""The agents tests share the fake Messages server and the contract-built profiles of tests/llm."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))

from llm_fixtures import fake, make_llm, sleeps  # noqa: F401
