"""Fixtures for the LLM tests: a running fake Messages server and an adapter that never really sleeps."""

from llm_fixtures import fake, make_llm, sleeps  # noqa: F401
