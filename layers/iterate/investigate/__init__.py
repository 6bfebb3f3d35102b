"""Investigations: prove each issue with code run in the sandbox, retrying with feedback, in parallel."""

from iterate.investigate.loop import (
    READ_LEVEL_TYPES,
    GenerationFailed,
    code_source,
    confirm,
    investigate_all,
    investigate_issue,
    next_code,
    stop_reason,
    supports,
    validate,
)
from iterate.investigate.scripts import render_script, save_scripts, script_name

__all__ = [
    "READ_LEVEL_TYPES",
    "GenerationFailed",
    "code_source",
    "confirm",
    "investigate_all",
    "investigate_issue",
    "next_code",
    "render_script",
    "save_scripts",
    "script_name",
    "stop_reason",
    "supports",
    "validate",
]
