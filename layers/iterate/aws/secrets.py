"""The Anthropic key, fetched from Secrets Manager through Powertools parameters (cached, never logged)."""

from __future__ import annotations

import json
from typing import Any

from iterate.settings import Settings

# Powertools caches the value this long per container: a rotated key is picked up within 5 minutes.
SECRET_MAX_AGE_S = 300


def _key_from_secret(raw: str) -> str:
    # The secret may be the bare key or JSON such as {"ANTHROPIC_API_KEY": "..."} / {"apiKey": "..."}.
    text = raw.strip()
    if text.startswith("{"):
        data: dict[str, Any] = json.loads(text)
        for name in ("ANTHROPIC_API_KEY", "anthropic_api_key", "apiKey", "api_key", "key"):
            if data.get(name):
                return str(data[name])
        return ""
    return text


def settings_with_secret(settings: Settings, *, provider: Any = None) -> Settings:
    """`settings` with the API key filled from `settings.anthropic_secret_arn`; unchanged without an ARN.

    An empty secret leaves the key unset, so the agents run offline and the run says so, rather than failing.
    """
    if not settings.anthropic_secret_arn or settings.anthropic_api_key:
        return settings
    if provider is None:
        from aws_lambda_powertools.utilities import parameters

        raw = parameters.get_secret(settings.anthropic_secret_arn, max_age=SECRET_MAX_AGE_S)
    else:
        raw = provider.get(settings.anthropic_secret_arn, max_age=SECRET_MAX_AGE_S)
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8")
    key = _key_from_secret(str(raw))
    return settings.model_copy(update={"anthropic_api_key": key or None})
