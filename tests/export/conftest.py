"""Fixtures of the export tests: the dirty orders file analysed once per worker."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import matrix


@pytest.fixture(scope="session")
def orders_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    """(run dir, dirty csv, clean csv, work dir): the dirty orders file analysed by `iterate analyze`."""
    work = tmp_path_factory.mktemp("export-orders")
    run_dir, dirty, clean = matrix.analyse(work)
    return run_dir, dirty, clean, work
