"""The Anthropic key, fetched from Secrets Manager through Powertools parameters (cached, never logged)."""

from __future__ import annotations

import json
from typing import Any

from iterate.settings import Settings

# Powertools caches the value this long per container: a rotated key is picked up within 5 minutes.
SECRET_MAX_AGE_S = 300
# What the stack stores in the secret when it creates it: no key. Until someone puts the real key there
# (infra/README.md says how), every agent runs offline and each run says "offline", not "degraded".
SECRET_PLACEHOLDER = "PLACEHOLDER: no Anthropic API key set; put the key here to enable the LLM agents"
_KEY_FIELDS = ("ANTHROPIC_API_KEY", "anthropic_api_key", "apiKey", "api_key", "key")


def key_from_secret(raw: str) -> tuple[str | None, str | None]:
    """(the key, None), or (None, why there is none) for an empty, placeholder or unreadable value.

    The secret may hold the bare key or JSON such as {"ANTHROPIC_API_KEY": "..."} / {"apiKey": "..."}. A value
    that starts like JSON but does not parse as an object with a key is no key: it must not be sent to
    Anthropic as one (every call would fail), nor fail the step that reads it.
    """
    text = raw.strip()
    if not text:
        return None, "the secret is empty"
    if text == SECRET_PLACEHOLDER or text.startswith("PLACEHOLDER"):
        return None, "the secret still holds the placeholder the stack created"
    if text.startswith("{"):
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError:
            return None, "the secret starts with '{' but is not JSON"
        if not isinstance(data, dict):
            return None, "the secret's JSON is not an object"
        for name in _KEY_FIELDS:
            value = data.get(name)
            if isinstance(value, str) and value.strip():
                return value.strip(), None
        return None, f"the secret's JSON has none of the fields {', '.join(_KEY_FIELDS)}"
    return text, None


def settings_with_secret(settings: Settings, *, provider: Any = None) -> Settings:
    """`settings` with the API key filled from `settings.anthropic_secret_arn`; unchanged without an ARN.

    No usable key (empty, the placeholder, malformed JSON) leaves the key unset, so the agents run offline and
    the run says so, rather than failing or calling Claude with a bad key. Why is logged, never the value.
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
    key, problem = key_from_secret(str(raw))
    if problem is not None:
        from iterate.aws.observability import logger

        logger.warning("no Anthropic key: agents run offline", reason=problem)
    return settings.model_copy(update={"anthropic_api_key": key})
