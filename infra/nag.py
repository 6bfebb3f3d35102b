"""cdk-nag acknowledgments in one shape: every finding acknowledged names its rule and a written reason."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding (`AwsSolutions-IAM5[Resource::…]` style ids) on `construct`."""
    if not reason.strip():
        raise ValueError(f"acknowledging {rule} needs a reason")
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))


def render_intrinsic(value: Any) -> str:
    """A resolved CloudFormation value written the way cdk-nag names it in a finding id."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((fn, arg),) = value.items()
        if fn == "Ref":
            return f"<{arg}>"
        if fn == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if fn == "Fn::Join":
            sep, parts = arg
            return str(sep).join(render_intrinsic(p) for p in parts)
    return json.dumps(value, separators=(",", ":"))


def acknowledge_wildcard(construct: IConstruct, resource: str, reason: str) -> None:
    """Acknowledge AwsSolutions-IAM5 for exactly one wildcard resource (a token or a literal ARN)."""
    rendered = render_intrinsic(Stack.of(construct).resolve(resource))
    acknowledge(construct, f"AwsSolutions-IAM5[Resource::{rendered}]", reason)
