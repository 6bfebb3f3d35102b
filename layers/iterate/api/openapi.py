"""Export the API's OpenAPI document: `python -m iterate.api.openapi docs/openapi.json` (a test keeps it current)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from iterate import __version__
from iterate.api.app import create_app


def _no_deps() -> object:
    raise RuntimeError("exporting the schema never calls a route")


def openapi_document() -> dict[str, object]:
    """The document for every route (the API function's and the follow-up function's)."""
    from aws_lambda_powertools.event_handler.openapi.models import (
        SecuritySchemeType,  # type: ignore[attr-defined]
    )

    app = create_app(_no_deps, core=True, followup=True, fixes=True)  # type: ignore[arg-type]
    raw = app.get_openapi_json_schema(
        title="Iterate API",
        version=__version__,
        description=(
            "Datasets, analysis runs, issues, reports, smart-fix follow-ups and schedules. Every route is scoped "
            "to the caller (Cognito user pool `sub`); another owner's ids answer 404."
        ),
        security_schemes={
            "cognito": {  # type: ignore[dict-item]
                "type": SecuritySchemeType.apiKey,
                "name": "Authorization",
                "in": "header",
                "description": "Cognito user pool ID token (API Gateway COGNITO_USER_POOLS authorizer)",
            }
        },
        security=[{"cognito": []}],
    )
    document: dict[str, object] = json.loads(raw)
    return document


def render() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    out = Path((argv or sys.argv[1:] or ["docs/openapi.json"])[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
