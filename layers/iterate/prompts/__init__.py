"""Versioned prompt files (`<name>.v<N>.md`); the version, with a hash of the text, keys the response cache."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str  # e.g. "understanding.v1+3f2a9c1b": editing the file changes it, so cached answers expire
    text: str


@lru_cache(maxsize=32)
def load(name: str) -> Prompt:
    """The newest version of prompt `name` shipped in this package."""
    files = [f for f in resources.files(__package__).iterdir() if re.fullmatch(rf"{name}\.v\d+\.md", f.name)]
    if not files:
        raise FileNotFoundError(f"no prompt named {name!r}")
    newest = max(files, key=lambda f: int(f.name.rsplit(".v", 1)[1][:-3]))
    text = newest.read_text(encoding="utf-8").strip()
    short = hashlib.sha256(text.encode()).hexdigest()[:8]
    return Prompt(name=name, version=f"{newest.name[:-3]}+{short}", text=text)
