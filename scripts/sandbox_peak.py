"""How many sandbox invocations one run holds at once, and for how long each: the bundled sample (or --source)
through the real state machine under moto. "At once" counts invokes in flight from their request (the harness
runs one invocation of a function at a time, as one Lambda environment does; on AWS each request in flight is an
execution of its own); durations are the sandbox handler's own. The figures the sandbox's reserved concurrency
is sized from (infra/README.md, "Admission, quotas and throttling")."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "handlers"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", type=Path, default=REPO / "samples" / "orders.csv")
    parser.add_argument("--runs", type=int, default=2, help="runs one after the other")
    args = parser.parse_args()

    from awsenv import (
        BUCKET,
        MOTO_CONFIG,
        base_env,
        create_resources,
        create_state_machine,
        object_created_event,
        reset_caches,
        route_lambdas,
        run_execution,
    )
    from moto import mock_aws

    class Env:
        def setenv(self, key: str, value: str) -> None:
            os.environ[key] = value

        def delenv(self, key: str, raising: bool = True) -> None:
            os.environ.pop(key, None)

    base_env(Env(), ITERATE_SANDBOX_TIMEOUT_S="20", POWERTOOLS_LOG_LEVEL="CRITICAL")
    requests: list[tuple[float, float]] = []
    spans: list[tuple[float, float]] = []
    items: list[int] = []

    import boto3

    with mock_aws(config=MOTO_CONFIG):
        reset_caches()
        create_resources()
        arn = create_state_machine()
        s3 = boto3.client("s3", region_name="us-east-1")
        statuses = []
        for n in range(args.runs):
            key = f"uploads/alice/orders/run{n}-{args.source.name}"
            version = s3.put_object(Bucket=BUCKET, Key=key, Body=args.source.read_bytes())["VersionId"]
            with route_lambdas(size_check=False) as calls:
                done = run_execution(
                    boto3.client("stepfunctions", region_name="us-east-1"),
                    arn,
                    object_created_event(BUCKET, key, version, event_id=f"e{n}"),
                    timeout_s=600,
                )
            statuses.append(done["status"])
            requests.extend((asked, ended) for name, asked, _, ended in calls.spans if name == "sandbox")
            spans.extend((began, ended) for name, _, began, ended in calls.spans if name == "sandbox")
            items.extend(len(event.get("items") or [None]) for name, event in calls if name == "sandbox")
    edges = sorted([(a, 1) for a, _ in requests] + [(b, -1) for _, b in requests])
    peak = level = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    durations = sorted(b - a for a, b in spans)
    mean = sum(durations) / len(durations) if durations else 0.0
    print(f"runs {args.runs} of {args.source.name}: {statuses}")
    print(f"sandbox invocations {len(spans)} ({len(spans) / max(1, args.runs):.1f} per run)")
    print(f"proofs              {sum(items)} (at most {max(items, default=0)} in one invocation)")
    print(f"peak at once        {peak}")
    print(
        f"duration mean / p50 / max s  {mean:.2f} / {durations[len(durations) // 2]:.2f} / {durations[-1]:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
