"""The admission load test at full size under moto: 1,000 uploads from 50 owners within one minute, five of
them from one owner (the others ~20 each), through the real admission function, queue and slot leases
(tests/handlers/load_driver.py says exactly what is real). Prints the run's figures."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "handlers"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--uploads", type=int, default=1000)
    parser.add_argument("--owners", type=int, default=50)
    parser.add_argument("--window", type=float, default=60.0, help="seconds the uploads arrive within")
    parser.add_argument("--light", type=int, default=5, help="uploads of the one light owner")
    parser.add_argument("--owner-limit", type=int, default=5)
    parser.add_argument("--global-limit", type=int, default=50)
    parser.add_argument("--runs-quota", type=int, default=500, help="daily runs per owner")
    parser.add_argument("--run-min", type=float, default=3.0, help="a run's body, seconds (uniform)")
    parser.add_argument("--run-max", type=float, default=10.0)
    args = parser.parse_args()

    from awsenv import MOTO_CONFIG, base_env, create_resources, reset_caches
    from moto import mock_aws

    class Env:
        def setenv(self, key: str, value: str) -> None:
            os.environ[key] = value

        def delenv(self, key: str, raising: bool = True) -> None:
            os.environ.pop(key, None)

    base_env(
        Env(),
        ITERATE_MAX_CONCURRENT_RUNS=str(args.owner_limit),
        ITERATE_GLOBAL_CONCURRENT_RUNS=str(args.global_limit),
        ITERATE_QUOTA_RUNS_PER_DAY=str(args.runs_quota),
        ITERATE_ADMISSION_RETRY_S="1",
        POWERTOOLS_LOG_LEVEL="CRITICAL",  # RecordFailure logs each unreadable file's run at ERROR
    )
    from load_driver import create_pass_machine, run_load

    with mock_aws(config={**MOTO_CONFIG, "stepfunctions": {"execute_state_machine": False}}):
        create_resources()
        os.environ["ITERATE_STATE_MACHINE_ARN"] = create_pass_machine()
        reset_caches()
        result = run_load(
            owners=args.owners,
            uploads=args.uploads,
            window_s=args.window,
            owner_limit=args.owner_limit,
            global_limit=args.global_limit,
            run_s=(args.run_min, args.run_max),
            light_owner_uploads=args.light,
            timeout_s=3600,
        )
    print(
        f"admission load: limits {args.owner_limit} per owner, {args.global_limit} in all; "
        f"runs {args.run_min:g}-{args.run_max:g} s; waiting messages back after 1 s (longer as they wait)"
    )
    print(result.table())
    ok = (
        not result.other_failures
        and not result.over_limit
        and result.succeeded + result.user_errors == result.uploads
        and (result.left_in_queue, result.left_leases, result.left_queue_entries) == (0, 0, 0)
        and result.left_slots_counted == 0
    )
    print("verdict:", "every run SUCCEEDED or a user error; limits held; queue drained" if ok else "FAILED")
    # The window is a figure of this machine (its load decides how late a thread wakes), not of correctness.
    within = result.last_upload_s <= args.window
    print(
        f"window: the last upload handed over at {result.last_upload_s:.2f} s,"
        f" {'within' if within else 'NOT within'} the {args.window:g} s its {args.uploads} uploads were planned in"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
