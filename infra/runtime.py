"""What each function is given at deploy time, kept free of CDK so the moto harness runs with the same values."""

from __future__ import annotations

from iterate.aws.payloads import MAX_SANDBOX_CODE_BYTES, STATE_LIMIT_BYTES

# The sandbox function's caps (its environment). Its output cap stays below Step Functions' 256 KiB state
# limit, and any result JSON over the inline cap is PUT to S3 and passed on as a key; what a state in the
# investigation loop can hold at most (code + inline result + run and URLs) stays under the limit.
SANDBOX_MAX_OUTPUT_BYTES = 200_000
# The chunk Map's MaxConcurrency by default: chunk functions at once, per run (each holds one range).
CHUNK_CONCURRENCY = 40
SANDBOX_INLINE_RESULT_BYTES = 64 * 1024
STATE_OVERHEAD_BYTES = 16 * 1024  # the run, two presigned URLs, attempt counters (measured: ~4 KB)
assert SANDBOX_MAX_OUTPUT_BYTES < STATE_LIMIT_BYTES
assert MAX_SANDBOX_CODE_BYTES + SANDBOX_INLINE_RESULT_BYTES + STATE_OVERHEAD_BYTES < STATE_LIMIT_BYTES

# The DynamoDB actions each function's code makes (iterate.storage.dynamo, through its steps or routes), and
# nothing more: no Scan anywhere, DeleteItem only where a route deletes. "Query" is a query of the table,
# "Query:GSI1" one of its index (an owner's runs of one dataset). tests/statemachine records every call a run
# and the API make and checks it against this.
TABLE_ACCESS: dict[str, frozenset[str]] = {
    "profile": frozenset({"GetItem", "PutItem", "UpdateItem"}),  # claim (a replayed raw event), run, upload
    "chunk": frozenset(),  # one byte range of the upload in, its partial out: no table at all
    "understand": frozenset({"GetItem", "UpdateItem"}),
    "analyze": frozenset({"GetItem", "UpdateItem", "Query:GSI1"}),  # the previous run, for the comparison
    "investigate": frozenset({"GetItem", "UpdateItem", "Query"}),  # the script library's index
    "sandbox": frozenset(),
    # The issues, in batches; the run's new proofs into the script library's index; the accepted issues.
    # Both end a run: its run slots go back (one transaction over the lease and the two counters).
    "report": frozenset(
        {"GetItem", "PutItem", "UpdateItem", "BatchWriteItem", "Query", "TransactWriteItems"}
    ),
    "record_failure": frozenset({"GetItem", "PutItem", "UpdateItem", "TransactWriteItems"}),
    # LLM calls take from the deployment's token bucket and count into the owner's daily usage.
    # Admission: upload claims, QUEUED runs, queue entries (DeleteItem when started), quotas; slots taken and
    # given back in transactions; expired leases found by a Query of the lease partition.
    "admission": frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "TransactWriteItems"}),
    "followup": frozenset({"GetItem", "PutItem", "UpdateItem", "Query"}),
    # The fix route: the run and its follow-ups (Query), the fix job it records and reads back.
    "fix": frozenset({"GetItem", "PutItem", "UpdateItem", "Query"}),
    # The fix worker: the job, the run and its follow-ups (Query), the version and the run started on it (queued
    # by admission's intake in-process: one transaction).
    "fix_worker": frozenset({"GetItem", "PutItem", "UpdateItem", "Query", "TransactWriteItems"}),
    # Schedules, idempotency keys and runs refused before they started are deleted; DELETE /datasets/{id}
    # removes a dataset's items in batches (BatchWriteItem) after finding them (Query, Query:GSI1).
    # A cancel, and DELETE /datasets/{id}, give run slots back (TransactWriteItems).
    "api": frozenset(
        {
            "GetItem",
            "PutItem",
            "UpdateItem",
            "DeleteItem",
            "BatchWriteItem",
            "Query",
            "Query:GSI1",
            "TransactWriteItems",
        }
    ),
}
# IAM has no TransactWriteItems action: each write inside a transaction is authorized as itself. The run slots'
# transactions put, update and delete; where a function's transactions write less, it is listed here: the fix
# worker's one transaction is a run's intake (the run, its quota charge, its queue entry, its waiting owner).
TRANSACTION_WRITES: dict[str, frozenset[str]] = {"fix_worker": frozenset({"PutItem", "UpdateItem"})}
DEFAULT_TRANSACTION_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})


def transaction_writes(function: str) -> frozenset[str]:
    """The item actions IAM must allow `function` for the writes of its transactions."""
    return TRANSACTION_WRITES.get(function, DEFAULT_TRANSACTION_WRITES)
