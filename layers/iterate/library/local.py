"""Local adapter of the ScriptLibrary port: one directory per owner and dataset, an entry and its code per file."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
import threading
from pathlib import Path

from pydantic import ValidationError

from iterate.contracts import StoredScript

log = logging.getLogger("iterate.library")
_SCRIPT_ID = re.compile(r"[0-9a-f]{8,64}")


def _key(value: str) -> str:
    """A directory name for an owner or a dataset: readable, and unique even where the readable part is not."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", value).strip("._")[-40:] or "x"
    return f"{readable}-{hashlib.sha256(value.encode('utf-8')).hexdigest()[:16]}"


class LocalScriptLibrary:
    """`<root>/<owner>/<dataset>/<scriptId>.json` (the entry) and `.py` (its code, runnable as it ran).

    Code that will run again is only read from files this user owns and no one else may write: a script
    planted by another account, or in a directory others can write to, is ignored.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser()
        self._lock = threading.Lock()

    def folder(self, owner: str, dataset_id: str) -> Path:
        if not owner or not dataset_id:
            raise ValueError("owner and dataset id are required: every script is kept per owner and dataset")
        return self.root / _key(owner) / _key(dataset_id)

    def _trusted(self, path: Path) -> bool:
        """Owned by this user and writable by no one else (files and the folders that hold them)."""
        if os.name != "posix":
            return True
        try:
            for target in (path, path.parent, path.parent.parent):
                info = target.stat()
                if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                    return False
        except OSError:
            return False
        return True

    def entries(self, owner: str, dataset_id: str) -> list[StoredScript]:
        folder = self.folder(owner, dataset_id)
        if not folder.is_dir():
            return []
        found: list[StoredScript] = []
        for path in sorted(folder.glob("*.json")):
            if not self._trusted(path):
                log.warning("stored script ignored: not owned by this user, or writable by others")
                continue
            try:
                entry = StoredScript.model_validate_json(path.read_bytes())
            except (OSError, ValidationError):
                continue
            if entry.owner == owner and entry.datasetId == dataset_id and path.stem == entry.scriptId:
                found.append(entry)
        return found

    def code(self, entry: StoredScript) -> str | None:
        if not _SCRIPT_ID.fullmatch(entry.scriptId):
            return None
        path = self.folder(entry.owner, entry.datasetId) / f"{entry.scriptId}.py"
        if not path.is_file() or not self._trusted(path):
            return None
        try:
            code = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        return code if hashlib.sha256(code.encode("utf-8")).hexdigest() == entry.codeSha256 else None

    def save(self, entry: StoredScript, code: str) -> None:
        if not _SCRIPT_ID.fullmatch(entry.scriptId):
            raise ValueError(f"not a script id: {entry.scriptId!r}")
        folder = self.folder(entry.owner, entry.datasetId)
        with self._lock:
            for level in (self.root, folder.parent, folder):
                level.mkdir(mode=0o700, parents=True, exist_ok=True)
            # The code first, then the entry that points at it: a reader never finds an entry without code.
            self._write(folder / f"{entry.scriptId}.py", code.encode("utf-8"))
            self._write(folder / f"{entry.scriptId}.json", entry.model_dump_json(indent=2).encode("utf-8"))

    @staticmethod
    def _write(target: Path, data: bytes) -> None:
        tmp = target.with_name(f".{target.name}.tmp{os.getpid()}-{threading.get_ident()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        tmp.replace(target)  # atomic: a reader never sees half a file
