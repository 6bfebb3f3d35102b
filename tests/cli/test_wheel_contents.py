"""What an installed engine reads must ship with it: every data file of the package (not Python) is matched by
the package-data patterns of pyproject.toml. Without detect/fitted.json a wheel would decide with the unfitted
reading, silently."""

from __future__ import annotations

import subprocess
import tomllib
from fnmatch import fnmatch
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_data_file_of_the_package_is_declared_as_package_data() -> None:
    # Given the package's tracked files that are not Python, and the patterns that put data into the wheel
    tracked = subprocess.run(
        ["git", "ls-files", "layers/iterate"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    data = [Path(p).relative_to("layers/iterate").as_posix() for p in tracked if not p.endswith(".py")]
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "iterate"
    ]
    # Then each one is declared (the fitted decision among them)
    assert "detect/fitted.json" in data
    assert [p for p in data if not any(fnmatch(p, pat) for pat in patterns)] == []
