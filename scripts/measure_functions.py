"""Prints each Lambda function's unzipped size (code + real arm64 layers) and its cold-import time."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `infra` importable
os.environ.setdefault(
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20"
)  # the CDK import below starts jsii

from infra.constructs.functions import FUNCTION_SPECS
from infra.measure import LAMBDA_UNZIPPED_LIMIT, built_layers, cold_import, function_sizes, layer_conflicts

MB = 1024 * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="cold imports per function (median reported)")
    args = parser.parse_args(argv)
    layers = built_layers()
    sizes = {s.name: s for s in function_sizes(layers)}
    print(
        "Sizes: unzipped MiB, arm64 layers as built under .assets/ (Lambda limit 250 MiB).\n"
        "Cold import: `import handler` in a fresh host interpreter (x86_64, Python "
        f"{sys.version_info.major}.{sys.version_info.minor}; arm64 wheels cannot load here), seeing only the "
        "top-level packages the function's layers ship, median of "
        f"{args.repeat}.\n"
    )
    header = f"{'function':<15} {'layers':<32} {'code KiB':>8} {'layers':>7} {'total':>7} {'import s':>9}  heavy imports / error"
    print(header)
    print("-" * len(header))
    worst = 0
    for spec in FUNCTION_SPECS:
        size = sizes[spec.name]
        runs = [cold_import(spec, layers) for _ in range(args.repeat)]
        ok = [r for r in runs if r.ok and r.seconds is not None]
        secs = f"{statistics.median(r.seconds for r in ok if r.seconds is not None):.2f}" if ok else "-"
        note = ", ".join(ok[0].heavy) if ok else (runs[0].error or "failed")
        conflicts = layer_conflicts(spec, layers)
        if conflicts:
            note += f"  CONFLICT {conflicts}"
        flag = "  OVER LIMIT" if size.total_bytes >= LAMBDA_UNZIPPED_LIMIT else ""
        worst = max(worst, size.total_bytes)
        print(
            f"{spec.name:<15} {'+'.join(spec.layers):<32} {size.code_bytes / 1024:>8.1f} "
            f"{size.layer_bytes / MB:>7.1f} {size.total_bytes / MB:>7.1f} {secs:>9}  {note}{flag}"
        )
    print(f"\nlargest function: {worst / MB:.1f} MiB of {LAMBDA_UNZIPPED_LIMIT / MB:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
