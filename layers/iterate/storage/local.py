"""Local adapters: a run directory as the artifact store, a JSON file as the run repository."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from iterate.storage import StatusConflictError


class LocalArtifactStore:
    """Artifacts as files under one directory; keys are relative paths and may not escape it."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        target = (self.root / key).resolve()
        if target != self.root and self.root not in target.parents:
            raise ValueError(f"artifact key {key!r} escapes the run directory")
        return target

    def put_bytes(self, key: str, data: bytes, *, content_type: str = "application/octet-stream") -> str:
        target, tmp = self._staging(key)
        tmp.write_bytes(data)
        tmp.replace(target)  # atomic: a reader never sees half a file
        return str(target)

    def _staging(self, key: str) -> tuple[Path, Path]:
        """The artifact's path (its directory made) and a private temporary name beside it."""
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target, target.with_name(f".{target.name}.tmp{os.getpid()}-{threading.get_ident()}")

    def put_file(self, key: str, source: str | Path) -> str:
        """Copy a local file in (streamed by the OS, never read whole into memory), atomically."""
        target, tmp = self._staging(key)
        shutil.copyfile(source, tmp)
        tmp.replace(target)
        return str(target)

    def get_bytes(self, key: str) -> bytes:
        return self.path(key).read_bytes()

    def exists(self, key: str) -> bool:
        return self.path(key).exists()

    def uri(self, key: str) -> str:
        return str(self.path(key))


class LocalRunRepository:
    """Run records in one JSON file, with the same conditional status transitions as DynamoDB."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def _load(self) -> dict[str, dict[str, Any]]:
        if not self.path.exists():
            return {}
        data: dict[str, dict[str, Any]] = json.loads(self.path.read_text(encoding="utf-8"))
        return data

    def _save(self, runs: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(runs, indent=2, default=str), encoding="utf-8")
        tmp.replace(self.path)

    def create_run(self, run: dict[str, Any]) -> None:
        with self._lock:
            runs = self._load()
            if run["runId"] in runs:
                raise StatusConflictError(f"run {run['runId']} already exists")
            runs[run["runId"]] = dict(run)
            self._save(runs)

    def update_progress(self, run_id: str, *, step: str, percent: int, message: str = "") -> None:
        with self._lock:
            runs = self._load()
            runs.setdefault(run_id, {"runId": run_id}).update(
                {"step": step, "progress": percent, "message": message}
            )
            self._save(runs)

    def transition(self, run_id: str, *, from_status: str, to_status: str, **fields: Any) -> None:
        with self._lock:
            runs = self._load()
            run = runs.get(run_id)
            if run is None or run.get("status") != from_status:
                current = None if run is None else run.get("status")
                raise StatusConflictError(f"run {run_id} is {current!r}, not {from_status!r}")
            run.update(fields, status=to_status)
            self._save(runs)

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._load().get(run_id)
