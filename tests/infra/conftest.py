"""Infra fixtures: the app synthesized once per test process with placeholder layers (no wheel download)."""

from __future__ import annotations

import json

import pytest
from infra_helpers import Synth


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    from infra.app import STACK_NAME, build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    app, _stack = build_app(outdir=outdir, placeholder_assets=True)
    app.synth()  # raises if cdk-nag reports an unacknowledged finding
    template = json.loads((outdir / f"{STACK_NAME}.template.json").read_text())
    return Synth(outdir=outdir, template=template)
