"""Standalone scripts: each successful investigation saved beside the report, runnable on any copy of the data."""

from __future__ import annotations

import re

from iterate.contracts import Issue
from iterate.ports import ArtifactStore

SCRIPT = '''\
#!/usr/bin/env python3
"""Iterate investigation of issue {issue_id} ({issue_type}).

Rerun it on the dataset: python {file_name} DATA.parquet   (or a CSV file; every column is read as text)
It prints the same JSON evidence the sandbox produced. This copy runs outside the sandbox: read it first.
"""

import json
import sys

import numpy as np
import pandas as pd


def load(path):
    if path.endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        metadata = table.schema.metadata or {{}}
        frame = table.to_pandas()
        frame = frame.astype(object).where(frame.notna(), "").astype(str)
        if b"iterate.names" in metadata:  # the names as written, kept by Iterate's Parquet writer
            frame.columns = json.loads(metadata[b"iterate.names"])
        return frame
    sep = "\\t" if path.endswith((".tsv", ".tab")) else ","
    return pd.read_csv(path, dtype=str, keep_default_na=False, sep=sep)


if len(sys.argv) != 2:
    sys.exit("usage: python {file_name} DATA.parquet|DATA.csv")
df = load(sys.argv[1])
result = None

# ---- the investigation code, exactly as it ran in the sandbox ----
{code}
# ------------------------------------------------------------------

if result is not None:
    print(json.dumps(result, default=lambda v: v.item() if hasattr(v, "item") else str(v)))
'''


def script_name(issue_id: str) -> str:
    """A safe file name for an issue id."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", issue_id).strip(".") or "issue"


def render_script(issue: Issue) -> str:
    """The standalone script of an issue's successful investigation."""
    if issue.investigation is None or not issue.investigation.success:
        raise ValueError(f"issue {issue.id!r} has no successful investigation")
    name = f"{script_name(issue.id)}.py"
    return SCRIPT.format(
        issue_id=issue.id, issue_type=issue.type, file_name=name, code=issue.investigation.code.rstrip()
    )


def save_scripts(issues: list[Issue], store: ArtifactStore) -> list[str]:
    """Write `scripts/<issue_id>.py` for each proof (a confirmed issue's investigation); returns the keys.

    Code whose numbers could not be checked (unverified) or disagreed (unconfirmed) is no proof, and a
    script is what a reader runs outside the sandbox: only confirmed ones are saved.
    """
    keys = []
    for issue in issues:
        if issue.investigation is None or not issue.investigation.success or issue.status != "confirmed":
            continue
        key = f"scripts/{script_name(issue.id)}.py"
        store.put_bytes(key, render_script(issue).encode("utf-8"), content_type="text/x-python")
        keys.append(key)
    return keys
