"""Turn a model's answer into a validated contract: tolerate fences and prose around the JSON, refuse the rest."""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from iterate.llm.errors import LLMOutputError

M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The first JSON object (or array) in `text`, ignoring markdown fences and prose around it."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for chunk in candidates:
        for i, ch in enumerate(chunk):
            if ch not in "{[":
                continue
            try:
                value, _ = decoder.raw_decode(chunk, i)
            except json.JSONDecodeError:
                continue
            return value
    raise LLMOutputError("no JSON object found in the model's answer")


def parse_model(data: Any, model: type[M]) -> M:
    """Validate already-decoded data against a contract; a failure is an LLMOutputError naming the fields."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        fields = sorted({".".join(str(p) for p in err["loc"]) for err in exc.errors()})[:8]
        raise LLMOutputError(f"answer does not match {model.__name__}: {', '.join(fields)}") from exc
