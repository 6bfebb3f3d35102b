"""Storage adapters behind the ArtifactStore and RunRepository ports, plus JSON helpers over any store."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter

from iterate.ports import ArtifactStore

M = TypeVar("M", bound=BaseModel)


class StatusConflictError(Exception):
    """A status transition was refused because the run is not in the expected status."""


def put_model(store: ArtifactStore, key: str, model: BaseModel) -> str:
    return store.put_bytes(key, model.model_dump_json(indent=2).encode(), content_type="application/json")


def get_model(store: ArtifactStore, key: str, model: type[M]) -> M:
    return model.model_validate_json(store.get_bytes(key))


def put_models(store: ArtifactStore, key: str, models: list[M], model: type[M]) -> str:
    """A JSON array of models, serialised by pydantic's core (no Python dicts in between)."""
    data = TypeAdapter(list[model]).dump_json(models, indent=2)  # type: ignore[valid-type]
    return store.put_bytes(key, data, content_type="application/json")


def get_models(store: ArtifactStore, key: str, model: type[M]) -> list[M]:
    found: list[M] = TypeAdapter(list[model]).validate_json(store.get_bytes(key))  # type: ignore[valid-type]
    return found


def put_json(store: ArtifactStore, key: str, data: Any) -> str:
    return store.put_bytes(key, json.dumps(data, indent=2).encode(), content_type="application/json")


def get_json(store: ArtifactStore, key: str) -> Any:
    return json.loads(store.get_bytes(key))
