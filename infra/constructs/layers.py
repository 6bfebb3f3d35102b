"""Lambda layers: third-party dependency layers and the engine package, all arm64 / Python 3.12."""

from __future__ import annotations

from aws_cdk import AssetHashType, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.assets import BuiltLayer

RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64

LAYER_DESCRIPTIONS = {
    "core": "pydantic (contracts)",
    "data": "pandas, numpy, pyarrow, pydantic, openpyxl",
    "llm": "anthropic SDK, pydantic",
    "powertools": "AWS Lambda Powertools + X-Ray SDK",
    "iterate": "the Iterate engine package",
}


class LayersConstruct(Construct):
    """One LayerVersion per built asset directory; assets are hashed by their inputs, not re-scanned."""

    def __init__(self, scope: Construct, construct_id: str, *, assets: dict[str, BuiltLayer]) -> None:
        super().__init__(scope, construct_id)
        self.layers: dict[str, lambda_.LayerVersion] = {}
        for name, built in assets.items():
            self.layers[name] = lambda_.LayerVersion(
                self,
                f"{name.capitalize()}Layer",
                # The digest already covers the layer's inputs; hashing 200 MB of files on every synth would not.
                code=lambda_.Code.from_asset(
                    str(built.path), asset_hash=built.digest, asset_hash_type=AssetHashType.CUSTOM
                ),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[ARCHITECTURE],
                description=LAYER_DESCRIPTIONS.get(name, name),
                # Deleting a superseded layer version does not affect functions already deployed with it (Lambda
                # keeps their copy), so old versions are not retained to pile up against the storage quota.
                removal_policy=RemovalPolicy.DESTROY,
            )

    def get(self, names: tuple[str, ...]) -> list[lambda_.ILayerVersion]:
        return [self.layers[n] for n in names]
