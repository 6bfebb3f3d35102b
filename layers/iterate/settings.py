"""Settings: one model, validated from the environment on first use (never at import)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # LLM
    anthropic_api_key: str | None = Field(default=None, repr=False)
    anthropic_secret_arn: str | None = None  # on AWS the key comes from Secrets Manager
    anthropic_base_url: str | None = None
    model: str = "claude-sonnet-5-5"  # current Sonnet-class; ITERATE_MODEL overrides
    llm_timeout_s: float = 60.0
    llm_max_retries: int = 4
    cache_dir: str | None = None  # where Claude's answers are cached locally (default ~/.cache/iterate/llm)
    # Sandbox
    sandbox_timeout_s: float = 30.0
    sandbox_memory_mb: int = 8192
    sandbox_max_output_bytes: int = 1_000_000
    # A sandbox result (its JSON) larger than this is not returned inline by the sandbox Lambda: it is PUT to
    # the presigned URL the state machine gave it and the state carries its key (Step Functions caps state at
    # 256 KiB, and the state also holds the code and the run).
    sandbox_inline_result_bytes: int = Field(default=65_536, ge=1024)
    # The Lambda sandbox adapter: how often a throttled invoke is tried again (exponential backoff with full
    # jitter from the base delay, each wait capped), before it reports the sandbox unavailable.
    sandbox_throttle_retries: int = Field(default=6, ge=0)
    sandbox_throttle_base_s: float = Field(default=0.5, gt=0)
    sandbox_throttle_max_s: float = Field(default=20.0, gt=0)
    # Tests and red teams only: False switches off the sandbox's in-process layers (AST policy, restricted
    # builtins, audit hook, import finder) to show that the OS layers alone contain hostile code.
    sandbox_inprocess_checks: bool = True
    # What the sandbox Lambda empties after each invocation (its scratch); unset: a private temp folder.
    sandbox_scratch: str | None = None
    investigation_workers: int = 2
    investigation_max_attempts: int = 3
    # First-attempt template proofs (code we wrote) run this many to one sandbox process (each still in
    # its own namespace; anything that fails there runs alone): 0 or false runs every proof alone, 1 or
    # true uses the default size (iterate.investigate.loop.DEFAULT_BATCH). LLM-written code and retries
    # always run alone.
    investigation_batch: int = Field(default=1, ge=0)
    # The script library (iterate.library): proofs LLM-written code made, rerun first by the next run of
    # the same dataset. Locally a directory (from_env: ITERATE_SCRIPT_LIBRARY, else ~/.cache/iterate/scripts;
    # None on a Settings built in code: no library); on AWS the value is ignored and S3 + DynamoDB hold it.
    # "off" switches it off everywhere.
    script_library: str | None = None
    # Input size and shape (iterate.io.ReadLimits): a file over one is refused early, with exit 2 and a
    # message naming the limit and its ITERATE_MAX_* variable.
    max_file_bytes: int = Field(default=5_000_000_000, gt=0)
    max_decompressed_bytes: int = Field(default=5_000_000_000, gt=0)
    max_compression_ratio: float = Field(default=100.0, gt=1)
    max_columns: int = Field(default=10_000, gt=0)
    max_cells: int = Field(default=100_000_000, gt=0)  # rows × columns
    max_cell_bytes: int = Field(default=16_000_000, gt=0)
    max_json_depth: int = Field(default=100, gt=0)
    max_xlsx_cells: int = Field(default=5_000_000, gt=0)  # cells present in the first sheet's XML
    # Reading a large delimited file: byte ranges of about this size, parsed by this many worker processes
    # (None: one per core). A file of one range or less is read in one pass.
    workers: int | None = Field(default=None, ge=1)
    chunk_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    # With one worker, a file up to this size is read in one pass all the same: ranges parsed one after the
    # other only bound the memory, which a file this small does not need (iterate.io.chunked.Chunking).
    single_pass_bytes: int = Field(default=256 * 1024 * 1024, ge=0)
    # A table whose codes and dictionaries take this much memory or more is moved to files in the temporary
    # directory (TMPDIR) and mapped back (Table.spill): the kernel pages it in as the detectors read it and
    # can drop it again under pressure, instead of every page staying in the process. 0: never.
    spill_bytes: int = Field(default=256 * 1024 * 1024, ge=0)
    # When: "auto", only where memory is short (less than 3x the table's bytes available: iterate.memory
    # .spill_directory); "always", from spill_bytes on whatever the memory; "never".
    spill: Literal["auto", "always", "never"] = "auto"
    # The engine path (docs/engine.md): a delimited file of engine_bytes or more is analysed by DuckDB in place
    # (statistics, value counts, duplicates and flags over every row; detection on a bounded sample of
    # engine_sample_rows rows); "always" forces it on any CSV/TSV (the equivalence checks), "never" keeps the
    # single pass. engine_memory_mb caps DuckDB's own memory (it spills to TMPDIR past it) while detection runs
    # beside it; engine_scan_memory_mb while DuckDB alone holds memory (the load and the summaries before
    # detection): the 4 GB a run may take, less what DuckDB holds past its cap and the process itself (0.3-0.9
    # GB measured on 10M-50M rows; the table of 10M rows x 20 columns is 2.8 GB).
    engine: Literal["auto", "always", "never"] = "auto"
    engine_bytes: int = Field(default=2 * 1024**3, ge=0)
    engine_sample_rows: int = Field(default=200_000, ge=1000)
    engine_memory_mb: int = Field(default=2048, ge=128)
    engine_scan_memory_mb: int = Field(default=2560, ge=128)
    # The largest input the engine path takes on AWS (Athena over a Parquet copy: no process holds the table);
    # other inputs keep max_file_bytes.
    engine_max_bytes: int = Field(default=200 * 10**9, gt=0)
    # AWS
    bucket: str | None = None
    table: str | None = None
    event_bus: str = "default"
    sandbox_function: str | None = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env
        raw = {
            "anthropic_api_key": e.get("ANTHROPIC_API_KEY") or None,
            "anthropic_secret_arn": e.get("ITERATE_ANTHROPIC_SECRET_ARN") or None,
            "anthropic_base_url": e.get("ANTHROPIC_BASE_URL") or None,
            "model": e.get("ITERATE_MODEL"),
            "llm_timeout_s": e.get("ITERATE_LLM_TIMEOUT_S"),
            "llm_max_retries": e.get("ITERATE_LLM_MAX_RETRIES"),
            "cache_dir": e.get("ITERATE_CACHE_DIR"),
            "sandbox_timeout_s": e.get("ITERATE_SANDBOX_TIMEOUT_S"),
            "sandbox_memory_mb": e.get("ITERATE_SANDBOX_MEMORY_MB"),
            "sandbox_max_output_bytes": e.get("ITERATE_SANDBOX_MAX_OUTPUT_BYTES"),
            "sandbox_inline_result_bytes": e.get("ITERATE_SANDBOX_INLINE_RESULT_BYTES"),
            "sandbox_throttle_retries": e.get("ITERATE_SANDBOX_THROTTLE_RETRIES"),
            "sandbox_throttle_base_s": e.get("ITERATE_SANDBOX_THROTTLE_BASE_S"),
            "sandbox_throttle_max_s": e.get("ITERATE_SANDBOX_THROTTLE_MAX_S"),
            "sandbox_inprocess_checks": e.get("ITERATE_SANDBOX_INPROCESS_CHECKS"),
            "sandbox_scratch": e.get("ITERATE_SANDBOX_SCRATCH") or None,
            "investigation_workers": e.get("ITERATE_INVESTIGATION_WORKERS"),
            "investigation_max_attempts": e.get("ITERATE_INVESTIGATION_MAX_ATTEMPTS"),
            "investigation_batch": _switch(e.get("ITERATE_INVESTIGATION_BATCH")),
            "script_library": e.get("ITERATE_SCRIPT_LIBRARY") or _default_library(),
            "max_file_bytes": e.get("ITERATE_MAX_FILE_BYTES"),
            "max_decompressed_bytes": e.get("ITERATE_MAX_DECOMPRESSED_BYTES"),
            "max_compression_ratio": e.get("ITERATE_MAX_COMPRESSION_RATIO"),
            "max_columns": e.get("ITERATE_MAX_COLUMNS"),
            "max_cells": e.get("ITERATE_MAX_CELLS"),
            "max_cell_bytes": e.get("ITERATE_MAX_CELL_BYTES"),
            "max_json_depth": e.get("ITERATE_MAX_JSON_DEPTH"),
            "max_xlsx_cells": e.get("ITERATE_MAX_XLSX_CELLS"),
            "workers": e.get("ITERATE_WORKERS") or None,
            "chunk_bytes": e.get("ITERATE_CHUNK_BYTES"),
            "single_pass_bytes": e.get("ITERATE_SINGLE_PASS_BYTES"),
            "spill_bytes": e.get("ITERATE_SPILL_BYTES"),
            "spill": e.get("ITERATE_SPILL"),
            "engine": e.get("ITERATE_ENGINE"),
            "engine_bytes": e.get("ITERATE_ENGINE_BYTES"),
            "engine_sample_rows": e.get("ITERATE_ENGINE_SAMPLE_ROWS"),
            "engine_memory_mb": e.get("ITERATE_ENGINE_MEMORY_MB"),
            "engine_scan_memory_mb": e.get("ITERATE_ENGINE_SCAN_MEMORY_MB"),
            "engine_max_bytes": e.get("ITERATE_ENGINE_MAX_BYTES"),
            "bucket": e.get("ITERATE_BUCKET"),
            "table": e.get("ITERATE_TABLE"),
            "event_bus": e.get("ITERATE_EVENT_BUS"),
            "sandbox_function": e.get("ITERATE_SANDBOX_FUNCTION"),
        }
        return cls.model_validate({k: v for k, v in raw.items() if v is not None})


# The settings read from variables not named ITERATE_<FIELD>.
_ENV_NAMES = {"anthropic_api_key": "ANTHROPIC_API_KEY", "anthropic_base_url": "ANTHROPIC_BASE_URL"}


def env_name(field: str) -> str:
    """The environment variable `Settings.from_env` reads `field` from."""
    return _ENV_NAMES.get(field, f"ITERATE_{field.upper()}")


def invalid_settings(errors: list[Any]) -> str:
    """What is wrong with the environment, from a `Settings.from_env` ValidationError's `errors()`: each
    variable by its name with what it should be ("ITERATE_SPILL: Input should be 'auto', 'always' or 'never'").
    The values themselves are never repeated (one may be a key)."""
    return "; ".join(f"{env_name(str(e['loc'][0]))}: {e['msg']}" for e in errors)


LIBRARY_OFF = frozenset({"off", "none", "false", "0", "no"})


def library_enabled(settings: Settings) -> bool:
    """Whether the script library is used (on AWS: whenever it is not switched off)."""
    return (settings.script_library or "").strip().lower() not in LIBRARY_OFF


def _default_library() -> str | None:
    try:
        return str(Path.home() / ".cache" / "iterate" / "scripts")
    except RuntimeError:  # no home directory (some containers): no local library unless one is named
        return None


def _switch(value: str | None) -> str | None:
    """A count that may also be written as a switch: true/on/yes is 1, false/off/no is 0."""
    if value is None:
        return None
    words = {"true": "1", "on": "1", "yes": "1", "false": "0", "off": "0", "no": "0"}
    return words.get(value.strip().lower(), value.strip())


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once on first use."""
    return Settings.from_env()
