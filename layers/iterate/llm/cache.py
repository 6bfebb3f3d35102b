"""Response cache keyed by dataset content, agent, prompt version and instructions: a rerun costs no tokens."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any, Protocol

from iterate.ports import ArtifactStore


def cache_key(
    *,
    content_hash: str,
    agent: str,
    prompt_version: str,
    instructions: str | None,
    model: str,
    request_digest: str = "",
) -> str:
    """A stable key. `request_digest` (a hash of the rendered request) separates calls within one run,
    e.g. two issues investigated on the same dataset; it is itself a function of the dataset and inputs."""
    raw = json.dumps(
        [content_hash, agent, prompt_version, instructions or "", model, request_digest], ensure_ascii=True
    )
    return hashlib.sha256(raw.encode()).hexdigest()


def digest(obj: Any) -> str:
    """sha256 of a JSON-able object, keys sorted."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


class ResponseCache(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...
    def put(self, key: str, value: dict[str, Any]) -> None: ...


class MemoryCache:
    """Per-process cache (a warm Lambda container, a test)."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._data[key] = value


class DirectoryCache:
    """One JSON file per key under a directory (the laptop: e.g. ~/.cache/iterate/llm)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # a missing or torn entry is just a miss
        return data

    def put(self, key: str, value: dict[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(value), encoding="utf-8")
        tmp.replace(path)  # atomic, so parallel investigations never read half a file


class StoreCache:
    """Cache entries in an ArtifactStore (S3 on AWS) under a prefix shared by all runs of an owner."""

    def __init__(self, store: ArtifactStore, prefix: str = "llm-cache") -> None:
        self.store = store
        self.prefix = prefix.rstrip("/")

    def get(self, key: str) -> dict[str, Any] | None:
        name = f"{self.prefix}/{key}.json"
        try:
            if not self.store.exists(name):
                return None
            data: dict[str, Any] = json.loads(self.store.get_bytes(name))
        except Exception:  # the cache is an optimisation: any storage trouble is a miss, never a failure
            return None
        return data

    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            self.store.put_bytes(
                f"{self.prefix}/{key}.json", json.dumps(value).encode(), content_type="application/json"
            )
        except Exception:
            return
