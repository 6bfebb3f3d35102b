"""CDK app entry: `python infra/app.py` synthesizes the Iterate stack into cdk.out/ with cdk-nag (no Docker, no CLI)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if __name__ == "__main__":
    # Run as a script, sys.path[0] is infra/, whose `constructs` folder would shadow the CDK `constructs`
    # package; the repo root goes there instead so `infra.*` imports resolve as in the tests.
    sys.path[0] = str(REPO)
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")  # the host's Node is 20

from aws_cdk import App, Validations  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from infra.assets import layer_assets, placeholder_layer  # noqa: E402
from infra.stack import IterateStack, StackConfig  # noqa: E402

STACK_NAME = "Iterate"
PLACEHOLDER_ENV = "ITERATE_PLACEHOLDER_ASSETS"

# Feature flags a `cdk init` would put in cdk.json; the CLI is not used for synth, so they are passed here.
FEATURE_FLAGS: dict[str, Any] = {
    "@aws-cdk/aws-iam:minimizePolicies": True,
    "@aws-cdk/aws-s3:createDefaultLoggingPolicy": True,
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,
    "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
    "@aws-cdk/aws-apigateway:disableCloudWatchRole": False,
    "@aws-cdk/core:enablePartitionLiterals": True,
    "@aws-cdk/aws-ec2:restrictDefaultSecurityGroup": True,
    "@aws-cdk/aws-stepfunctions:useDistributedMapResultWriterV2": True,
}


def build_app(
    *,
    outdir: str | Path = REPO / "cdk.out",
    placeholder_assets: bool = False,
    context: dict[str, Any] | None = None,
    config: StackConfig | None = None,
) -> tuple[App, IterateStack]:
    """The app with its one stack and cdk-nag attached; `placeholder_assets` skips the layer download."""
    app = App(outdir=str(outdir), context={**FEATURE_FLAGS, **(context or {})})
    if config is None:
        config = StackConfig(
            **{k.removeprefix("iterate:"): v for k, v in (context or {}).items() if k.startswith("iterate:")}
        )
    if placeholder_assets and config.placeholder_code is None:
        config = config.model_copy(update={"placeholder_code": placeholder_layer("function").path})
    stack = IterateStack(
        app,
        STACK_NAME,
        config=config,
        layer_assets=layer_assets(placeholder=placeholder_assets),
        description="Iterate: data-quality agents (S3 upload → Step Functions → Lambda agents → report)",
    )
    # The acknowledgments (rule + reason) also go into each resource's Metadata: auditable in the template.
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, write_suppressions_to_cloud_formation=True))
    return app, stack


def main() -> int:
    placeholder = os.environ.get(PLACEHOLDER_ENV, "") not in ("", "0", "false")
    app, _stack = build_app(placeholder_assets=placeholder)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
