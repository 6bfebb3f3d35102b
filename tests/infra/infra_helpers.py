"""Helpers for the infra tests: find functions, roles and policy statements in a synthesized template."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # `infra` is a top-level folder, not an installed package
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@dataclass
class Synth:
    """A synthesized cloud assembly: the template, its directory and helpers to find things in it."""

    outdir: Path
    template: dict[str, Any]

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.template["Resources"]

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.resources.items() if v["Type"] == kind}

    def function_id(self, name: str) -> str:
        """Logical id of the Iterate function built from functions/<name>/ (by its description's spec)."""
        from infra.constructs.functions import FUNCTION_SPECS

        spec = next(s for s in FUNCTION_SPECS if s.name == name)
        matches = [
            k
            for k, v in self.of_type("AWS::Lambda::Function").items()
            if v["Properties"].get("Description") == spec.description
        ]
        assert len(matches) == 1, f"expected one function for {name}, found {matches}"
        return matches[0]

    def role_of(self, function_id: str) -> str:
        return self.resources[function_id]["Properties"]["Role"]["Fn::GetAtt"][0]

    def statements_of_role(self, role_id: str) -> list[dict[str, Any]]:
        """Every statement that applies to the role: its inline policies, attached AWS::IAM::Policy docs."""
        role = self.resources[role_id]["Properties"]
        statements = [s for p in role.get("Policies", []) for s in p["PolicyDocument"]["Statement"]]
        for policy in self.of_type("AWS::IAM::Policy").values():
            if {"Ref": role_id} in policy["Properties"].get("Roles", []):
                statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
        return statements


def actions_of(statement: dict[str, Any]) -> list[str]:
    action = statement.get("Action", [])
    return [action] if isinstance(action, str) else list(action)
