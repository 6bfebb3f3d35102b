"""A run's Glue tables on the engine path: their names, their owner's marks, and their removal when the run ends
without EngineStep's last round (RecordFailure, an execution aborted or timed out). Light: boto3 only, so the
failure and admission functions import it without the engine's dependencies."""

from __future__ import annotations

import re
from typing import Any

from iterate.aws.observability import logger, metrics

# Table parameters naming the run a table belongs to: only a run's own tables are ever removed for it.
OWNER_PARAMETER = "iterate:owner"
RUN_PARAMETER = "iterate:run"
_BATCH = 100  # BatchDeleteTable takes at most 100 names


def table_stem(run_id: str) -> str:
    """The prefix of every Glue table of the run (lower case: Glue keeps names so)."""
    return "r" + re.sub(r"[^a-z0-9]", "", run_id.lower())[:32]


def glue_names(run_id: str) -> dict[str, str]:
    """The run's two first tables (the parts, each range's first row) and the stem its other tables share."""
    stem = table_stem(run_id)
    return {"parts": f"{stem}_parts", "offsets": f"{stem}_offsets", "stem": stem}


def marks(owner: str, run_id: str) -> dict[str, str]:
    """The parameters a run's table carries, so that a cleanup removes its tables and no other run's."""
    return {OWNER_PARAMETER: owner, RUN_PARAMETER: run_id}


def drop_run_tables(glue: Any, database: str, *, owner: str, run_id: str) -> list[str]:
    """Remove every table of the run (`owner`'s `run_id`) from the engine database; the names removed.
    Idempotent: a run with no tables left, or a database that does not exist, removes nothing. A table whose
    name shares the run's stem but whose marks name another owner or run is left alone."""
    stem = table_stem(run_id)
    wanted = marks(owner, run_id)
    names: list[str] = []
    try:
        for page in glue.get_paginator("get_tables").paginate(DatabaseName=database, Expression=f"{stem}_.*"):
            for table in page.get("TableList", []):
                params = table.get("Parameters") or {}
                if table["Name"].startswith(stem + "_") and all(
                    params.get(k) == v for k, v in wanted.items()
                ):
                    names.append(table["Name"])
    except glue.exceptions.EntityNotFoundException:
        return []
    for start in range(0, len(names), _BATCH):
        response = glue.batch_delete_table(
            DatabaseName=database, TablesToDelete=names[start : start + _BATCH]
        )
        failed = [
            e
            for e in response.get("Errors", [])
            if e.get("ErrorDetail", {}).get("ErrorCode") != "EntityNotFoundException"
        ]
        if failed:  # anything but "already gone" is worth a retry of the step that asked
            raise RuntimeError(f"Glue could not delete the run's tables: {failed}")
    if names:
        logger.info("engine tables dropped", run_id=run_id, tables=len(names))
    return names


def cleanup_run_tables(glue: Any, database: str, *, owner: str, run_id: str) -> list[str]:
    """`drop_run_tables` where the run is being ended for another reason (its failure recorded, its slots
    released): a Glue error is logged and counted (EngineTablesLeft), never raised over the step's own work.
    The tables left hold no data (the Parquet under them expires with the chunk partials)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return drop_run_tables(glue, database, owner=owner, run_id=run_id)
    except (BotoCoreError, ClientError, RuntimeError) as exc:
        logger.error("engine tables left", run_id=run_id, error=type(exc).__name__, detail=str(exc))
        metrics.add_metric(name="EngineTablesLeft", unit="Count", value=1)
        return []
