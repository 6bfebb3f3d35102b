"""The Anthropic key comes from Secrets Manager through Powertools parameters, never from a plain env var."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from awsenv import REGION

from iterate.aws.secrets import SECRET_PLACEHOLDER, key_from_secret, settings_with_secret
from iterate.settings import Settings

pytestmark = pytest.mark.handler


@pytest.fixture(autouse=True)
def _fresh_parameter_cache() -> Any:
    from aws_lambda_powertools.utilities import parameters

    parameters.clear_caches()
    yield
    parameters.clear_caches()


@pytest.mark.parametrize(
    ("secret", "expected"),
    [("sk-ant-plain", "sk-ant-plain"), (json.dumps({"ANTHROPIC_API_KEY": "sk-ant-json"}), "sk-ant-json")],
)
def test_key_is_read_from_secrets_manager(aws: dict[str, Any], secret: str, expected: str) -> None:
    # Given the key stored as a secret (bare or as JSON) and settings that only know the secret's ARN
    arn = boto3.client("secretsmanager", region_name=REGION).create_secret(Name="k", SecretString=secret)[
        "ARN"
    ]
    settings = Settings(anthropic_secret_arn=arn)
    # When a function resolves its settings
    resolved = settings_with_secret(settings)
    # Then the key is set, and it never shows in the settings' repr (so never in a log line)
    assert resolved.anthropic_api_key == expected
    assert expected not in repr(resolved)


def test_empty_secret_means_offline_not_failure(aws: dict[str, Any]) -> None:
    # Given a secret created but not filled in yet
    arn = boto3.client("secretsmanager", region_name=REGION).create_secret(Name="k2", SecretString="{}")[
        "ARN"
    ]
    # When settings are resolved
    resolved = settings_with_secret(Settings(anthropic_secret_arn=arn))
    # Then there is no key: the agents run offline and the run reports it
    assert resolved.anthropic_api_key is None


def test_no_secret_arn_makes_no_call() -> None:
    class Refuse:
        def get(self, *args: Any, **kwargs: Any) -> str:
            raise AssertionError("no secret should be fetched without an ARN")

    # Given settings without a secret ARN (local mode, or a function that needs no LLM)
    settings = Settings()
    # When resolved, Then they come back unchanged without touching Secrets Manager
    assert settings_with_secret(settings, provider=Refuse()) is settings


@pytest.mark.parametrize(
    "secret",
    [
        SECRET_PLACEHOLDER,  # what the stack creates the secret with
        "   ",
        "{",  # a value starting with "{" that is not JSON (a generated random value could start so)
        "{sk-ant-not-json",
        '{"apiKey": ""}',
        '{"other": "x"}',
    ],
)
def test_a_secret_without_a_usable_key_means_offline_never_a_failure(
    aws: dict[str, Any], secret: str
) -> None:
    # Given the secret holding the stack's placeholder, blanks, or something that only starts like JSON
    arn = boto3.client("secretsmanager", region_name=REGION).create_secret(Name="k3", SecretString=secret)[
        "ARN"
    ]
    # When an LLM function resolves its settings
    resolved = settings_with_secret(Settings(anthropic_secret_arn=arn))
    # Then it has no key (offline agents, "offline" runs) and nothing was raised
    assert resolved.anthropic_api_key is None


def test_key_from_secret_says_why_there_is_no_key() -> None:
    assert key_from_secret(SECRET_PLACEHOLDER) == (
        None,
        "the secret still holds the placeholder the stack created",
    )
    assert key_from_secret("{oops")[1] == "the secret starts with '{' but is not JSON"
    assert key_from_secret(' {"ANTHROPIC_API_KEY": " sk-ant-1 "} ') == ("sk-ant-1", None)
    assert key_from_secret("sk-ant-2\n") == ("sk-ant-2", None)
