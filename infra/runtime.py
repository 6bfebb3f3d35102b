"""What each function is given at deploy time, kept free of CDK so the moto harness runs with the same values."""

from __future__ import annotations

from iterate.aws.payloads import MAX_SANDBOX_CODE_BYTES, STATE_LIMIT_BYTES

# The sandbox function's caps (its environment). Its output cap stays below Step Functions' 256 KiB state
# limit, and any result JSON over the inline cap is PUT to S3 and passed on as a key; what a state in the
# investigation loop can hold at most (code + inline result + run and URLs) stays under the limit.
SANDBOX_MAX_OUTPUT_BYTES = 200_000
SANDBOX_INLINE_RESULT_BYTES = 64 * 1024
STATE_OVERHEAD_BYTES = 16 * 1024  # the run, two presigned URLs, attempt counters (measured: ~4 KB)
assert SANDBOX_MAX_OUTPUT_BYTES < STATE_LIMIT_BYTES
assert MAX_SANDBOX_CODE_BYTES + SANDBOX_INLINE_RESULT_BYTES + STATE_OVERHEAD_BYTES < STATE_LIMIT_BYTES
