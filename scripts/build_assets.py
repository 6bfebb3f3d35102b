"""Builds (or reuses) the arm64 Lambda layers under .assets/ without Docker and prints their unzipped sizes."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `infra` importable

from infra.assets import LAYER_NAMES, build_layer, tree_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "layers", nargs="*", metavar="LAYER", help=f"default: all of {', '.join(LAYER_NAMES)}"
    )
    args = parser.parse_args(argv)
    names = args.layers or list(LAYER_NAMES)
    unknown = sorted(set(names) - set(LAYER_NAMES))
    if unknown:
        parser.error(f"unknown layer(s): {', '.join(unknown)}")
    print(f"{'layer':<12} {'unzipped MB':>12} {'seconds':>8}  path")
    for name in names:
        t0 = time.perf_counter()
        layer = build_layer(name)
        took = time.perf_counter() - t0
        size_mb = tree_size(layer.path / "python") / 1e6
        print(f"{name:<12} {size_mb:>12.1f} {took:>8.1f}  {layer.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
