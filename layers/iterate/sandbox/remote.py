"""The sandbox as a Lambda: its event model, the caller-side adapter (LambdaSandbox) and the function's service."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from pydantic import Field, model_validator

from iterate.contracts import CodeInvestigation, StopReason
from iterate.contracts.base import Contract
from iterate.ports import DatasetRef
from iterate.sandbox import oslayers, ranged
from iterate.sandbox.local import LocalSandbox, SandboxLimits

MAX_DATASET_BYTES = 4 * 1024**3  # what /tmp (ephemeral storage) must hold, at most
MAX_EVENT_COLUMNS = 10_000
FETCH_TIMEOUT_S = 60.0


class SandboxUnavailable(Exception):
    """The sandbox function could not be reached or did not answer (throttled, network, bad payload)."""


class DatasetFetchError(Exception):
    """The sandbox function could not download the dataset it was given."""


class ResultStoreError(Exception):
    """The sandbox function could not PUT a large result to the presigned URL it was given."""


class SandboxDataset(Contract):
    """Where the dataset is: a presigned GET (preferred: the function needs no S3 permission) or an object."""

    presigned_url: str | None = None
    bucket: str | None = None
    key: str | None = None
    version_id: str | None = None
    # The only columns the code reads (names as written: a template's, or those the syntax of other code shows,
    # iterate.investigate.projection; each is written in the code, so the list is never longer than the code):
    # only their chunks are fetched and loaded. None: the whole dataset.
    columns: list[str] | None = Field(default=None, max_length=MAX_EVENT_COLUMNS)

    @model_validator(mode="after")
    def _one_location(self) -> SandboxDataset:
        if bool(self.presigned_url) == bool(self.bucket and self.key):
            raise ValueError("give either presigned_url, or bucket and key")
        return self


MAX_CODE_CHARS = 100_000


class SandboxEvent(Contract):
    """The sandbox function's event: `{code, dataset: {presigned_url | bucket/key/version_id}, timeout_s}`,
    and from the state machine `result_url`/`result_key`: a presigned PUT for a result too large to return."""

    code: str = Field(max_length=MAX_CODE_CHARS)
    dataset: SandboxDataset
    timeout_s: float | None = Field(default=None, gt=0, le=600)
    result_url: str | None = Field(default=None, description="presigned PUT for a result over the inline cap")
    result_key: str | None = Field(default=None, max_length=1024, description="the key result_url writes")

    @model_validator(mode="after")
    def _result_url_has_its_key(self) -> SandboxEvent:
        if bool(self.result_url) != bool(self.result_key):
            raise ValueError("give result_url and result_key together")
        return self


# A batch event carries its items' code in the state (256 KiB): the caller packs them well under that.
MAX_BATCH_ITEMS = 50


class SandboxBatchItem(Contract):
    """One template proof of a batch: its code and the only columns it reads (None: every column)."""

    code: str = Field(max_length=MAX_CODE_CHARS)
    columns: list[str] | None = Field(default=None, max_length=MAX_EVENT_COLUMNS)


class SandboxBatchEvent(Contract):
    """The sandbox function's batch event: several template proofs of one run against its dataset (whose
    `columns` are the union of the items'), one download and one process for all of them; `timeout_s` is each
    proof's, as a single event's. `result_url`/`result_key`: where a batch result over the inline cap goes."""

    items: list[SandboxBatchItem] = Field(min_length=1, max_length=MAX_BATCH_ITEMS)
    dataset: SandboxDataset
    timeout_s: float | None = Field(default=None, gt=0, le=600)
    result_url: str | None = Field(default=None, description="presigned PUT for a result over the inline cap")
    result_key: str | None = Field(default=None, max_length=1024, description="the key result_url writes")

    @model_validator(mode="after")
    def _result_url_has_its_key(self) -> SandboxBatchEvent:
        if bool(self.result_url) != bool(self.result_key):
            raise ValueError("give result_url and result_key together")
        return self


class SandboxBatchResult(Contract):
    """One verdict per item, in order; None where the item was not settled here (the caller runs it alone).

    A verdict with `batch_size` > 1 is a success inside the shared process; any other is the item's own run,
    alone, with the event's whole timeout (a static refusal included)."""

    items: list[CodeInvestigation | None]


def _copy_capped(source: BinaryIO, target: Path, limit: int) -> int:
    written = 0
    with open(target, "wb") as out:
        while chunk := source.read(1 << 20):
            written += len(chunk)
            if written > limit:
                raise DatasetFetchError(f"dataset larger than {limit} bytes")
            out.write(chunk)
    return written


def fetch_url(
    url: str, target: Path, *, limit: int = MAX_DATASET_BYTES, timeout_s: float = FETCH_TIMEOUT_S
) -> int:
    """Download a presigned URL to `target`; returns the size. Uses requests when installed, else urllib."""
    if not url.startswith("https://") and not url.startswith("http://"):
        raise DatasetFetchError("the dataset URL must be http(s)")
    try:
        import requests
    except ImportError:
        requests = None  # type: ignore[assignment]
    try:
        if requests is not None:
            with requests.get(url, stream=True, timeout=timeout_s) as response:
                if response.status_code != 200:
                    raise DatasetFetchError(f"dataset download failed: HTTP {response.status_code}")
                return _copy_capped(response.raw, target, limit)
        import urllib.request

        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return _copy_capped(response, target, limit)
    except DatasetFetchError:
        raise
    except Exception as exc:  # network, HTTP and TLS errors all mean the same to the caller
        raise DatasetFetchError(f"dataset download failed: {type(exc).__name__}") from exc


def put_url(url: str, body: bytes, *, timeout_s: float = FETCH_TIMEOUT_S) -> None:
    """PUT `body` to a presigned URL (the sandbox's only write: its own result object)."""
    if not url.startswith("https://") and not url.startswith("http://"):
        raise ResultStoreError("the result URL must be http(s)")
    try:
        import requests
    except ImportError:
        requests = None  # type: ignore[assignment]
    try:
        if requests is not None:
            response = requests.put(url, data=body, timeout=timeout_s)
            if response.status_code != 200:
                raise ResultStoreError(f"result upload failed: HTTP {response.status_code}")
            return
        import urllib.request

        request = urllib.request.Request(url, data=body, method="PUT")
        with urllib.request.urlopen(request, timeout=timeout_s):
            return
    except ResultStoreError:
        raise
    except Exception as exc:  # network, HTTP and TLS errors all mean the same to the caller
        raise ResultStoreError(f"result upload failed: {type(exc).__name__}") from exc


def deliver_result(
    result: CodeInvestigation,
    event: SandboxEvent,
    *,
    inline_limit: int,
    put: Callable[[str, bytes], None] = put_url,
) -> dict[str, Any]:
    """What the sandbox function returns: the result itself while its JSON fits `inline_limit`, else a
    reference `{resultKey, resultBytes, success, stopped}` after PUTting the whole result to `result_url`.

    Step Functions fails an execution whose state passes 256 KiB, and no Catch sees it; this keeps the state
    small whatever the code printed. Without a result URL (a direct invoke, whose response may hold 6 MB)
    the result is returned as it is. A result that cannot be stored becomes a failed `output_size` attempt.
    """
    body = result.model_dump_json().encode()
    if len(body) <= inline_limit or not event.result_url or not event.result_key:
        return result.model_dump(mode="json")
    try:
        put(event.result_url, body)
    except ResultStoreError as exc:
        failed = CodeInvestigation(
            code=result.code,
            success=False,
            error=f"the result ({len(body)} bytes) is over the {inline_limit}-byte inline cap and could not "
            f"be stored: {exc}",
            stopped="output_size",
            execution_time_ms=result.execution_time_ms,
        )
        return failed.model_dump(mode="json")
    return {
        "resultKey": event.result_key,
        "resultBytes": len(body),
        "success": result.success,
        "stopped": result.stopped,
    }


def fetch_some_columns(
    dataset: SandboxDataset, target: Path, columns: tuple[str, ...], s3_client: Callable[[], Any] | None
) -> int | None:
    """Only the footer and `columns`' chunks of the dataset, by ranged GETs, into a sparse `target`
    (iterate.sandbox.ranged); the bytes fetched, or None when the whole object must be fetched instead."""
    if dataset.presigned_url:
        get = ranged.http_range_get(dataset.presigned_url, timeout_s=FETCH_TIMEOUT_S)
    else:
        assert s3_client is not None and dataset.bucket and dataset.key
        get = ranged.s3_range_get(s3_client(), dataset.bucket, dataset.key, dataset.version_id)
    try:
        return ranged.fetch_columns(get, target, columns, limit=MAX_DATASET_BYTES)
    except ranged.RangeNotServed:
        return None
    except ValueError as exc:
        raise DatasetFetchError(f"dataset download failed: {exc}") from exc
    except Exception as exc:  # network, HTTP, TLS and S3 errors all mean the same to the caller
        raise DatasetFetchError(f"dataset download failed: {type(exc).__name__}") from exc


def fetch_object(
    s3_client: Any, dataset: SandboxDataset, target: Path, *, limit: int = MAX_DATASET_BYTES
) -> int:
    """Download `bucket/key[@version]` (needs s3:GetObject on exactly that object)."""
    extra = {"VersionId": dataset.version_id} if dataset.version_id else {}
    try:
        body = s3_client.get_object(Bucket=dataset.bucket, Key=dataset.key, **extra)["Body"]
    except Exception as exc:
        raise DatasetFetchError(f"dataset download failed: {type(exc).__name__}") from exc
    return _copy_capped(body, target, limit)


def run_event(
    event: SandboxEvent,
    *,
    limits: SandboxLimits,
    fetch: Callable[[str, Path], int] = fetch_url,
    s3_client: Callable[[], Any] | None = None,
    scratch: str | None = None,
) -> CodeInvestigation:
    """The sandbox function's work: fetch the dataset to local disk, run the code locally, return the verdict.

    Static policy first, so refused code costs no download. A dataset that cannot be fetched is reported
    as a failed investigation (`crash`), not raised: the run goes on.
    """
    started = time.perf_counter()
    # One investigation per invocation: a zygote would cost more than it saves.
    sandbox = LocalSandbox(replace(limits, prefork=False))
    refusal = sandbox.refuse(event.code)
    if refusal is not None:
        return refusal
    workdir = Path(tempfile.mkdtemp(prefix="iterate-dataset-", dir=scratch))
    dataset = event.dataset
    columns = tuple(dataset.columns) if dataset.columns else None
    try:
        target = workdir / "data.parquet"
        try:
            if not dataset.presigned_url and s3_client is None:
                raise DatasetFetchError("no S3 client configured for a bucket/key dataset")
            if columns is None or fetch_some_columns(dataset, target, columns, s3_client) is None:
                if dataset.presigned_url:
                    fetch(dataset.presigned_url, target)
                else:
                    assert s3_client is not None
                    fetch_object(s3_client(), dataset, target)
        except DatasetFetchError as exc:
            return CodeInvestigation(
                code=event.code,
                success=False,
                error=str(exc),
                stopped="crash",
                execution_time_ms=round((time.perf_counter() - started) * 1000, 1),
            )
        return sandbox.run(
            event.code, DatasetRef(path=str(target), columns=columns), timeout_s=event.timeout_s
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# Seconds kept back from an invocation's remaining time for delivering the result and cleaning up.
BATCH_RESERVE_S = 5.0


def run_batch_event(
    event: SandboxBatchEvent,
    *,
    limits: SandboxLimits,
    remaining_s: Callable[[], float],
    fetch: Callable[[str, Path], int] = fetch_url,
    s3_client: Callable[[], Any] | None = None,
    scratch: str | None = None,
) -> SandboxBatchResult:
    """The sandbox function's batch: one download of the items' columns, the items in one sandbox process
    (LocalSandbox.run_batch: each code's items in a process of their own, the OS layers and limits around the
    whole), then each item that did not succeed there run alone, in a fresh process with its own timeout, while
    `remaining_s()` leaves room for the event's whole timeout. An item not settled so (no time left, the dataset
    not fetched, an alone run cut short by the time left) is None: the caller runs it in an invocation of its own.
    A timeout or a crash of one item therefore costs the others nothing but time.
    """
    sandbox = LocalSandbox(replace(limits, prefork=False))
    timeout = float(event.timeout_s if event.timeout_s is not None else limits.timeout_s)
    verdicts: list[CodeInvestigation | None] = [sandbox.refuse(item.code) for item in event.items]
    todo = [i for i, found in enumerate(verdicts) if found is None]
    if not todo:
        return SandboxBatchResult(items=verdicts)
    wanted = [tuple(event.items[i].columns or ()) or None for i in todo]
    union = (
        None if any(w is None for w in wanted) else tuple(dict.fromkeys(c for w in wanted for c in w or ()))
    )
    workdir = Path(tempfile.mkdtemp(prefix="iterate-dataset-", dir=scratch))
    try:
        target = workdir / "data.parquet"
        dataset = event.dataset.model_copy(update={"columns": list(union) if union else None})
        try:
            if not dataset.presigned_url and s3_client is None:
                raise DatasetFetchError("no S3 client configured for a bucket/key dataset")
            if union is None or fetch_some_columns(dataset, target, union, s3_client) is None:
                if dataset.presigned_url:
                    fetch(dataset.presigned_url, target)
                else:
                    assert s3_client is not None
                    fetch_object(s3_client(), dataset, target)
        except DatasetFetchError:
            return SandboxBatchResult(items=verdicts)  # each item alone meets it and reports it
        data = DatasetRef(path=str(target), columns=union)
        if len(todo) > 1:
            codes = [event.items[i].code for i in todo]
            runs = sandbox.run_batch(codes, data, columns=wanted, timeout_s=timeout)
            for i, run in zip(todo, runs, strict=True):
                if run.success:
                    verdicts[i] = run
        for i, columns in zip(todo, wanted, strict=True):
            if verdicts[i] is not None:
                continue
            budget = remaining_s() - BATCH_RESERVE_S
            if budget < 1.0:
                break
            alone = sandbox.run(
                event.items[i].code, replace(data, columns=columns), timeout_s=min(timeout, budget)
            )
            # A stop for time that the whole timeout might not have met is no verdict: it runs again alone.
            cut_short = alone.stopped == "timeout" and budget < timeout
            verdicts[i] = None if cut_short else alone.model_copy(update={"batch_size": None})
        return SandboxBatchResult(items=verdicts)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def deliver_batch_result(
    result: SandboxBatchResult,
    event: SandboxBatchEvent,
    *,
    inline_limit: int,
    put: Callable[[str, bytes], None] = put_url,
) -> dict[str, Any]:
    """What the sandbox function returns for a batch: the result while its JSON fits `inline_limit`, else
    `{resultKey, resultBytes, success, stopped}` after PUTting it whole to `result_url` (as `deliver_result`).
    A result that cannot be stored settles nothing: every item is None, and runs again alone."""
    body = result.model_dump_json().encode()
    if len(body) <= inline_limit or not event.result_url or not event.result_key:
        return result.model_dump(mode="json")
    try:
        put(event.result_url, body)
    except ResultStoreError:
        return SandboxBatchResult(items=[None] * len(result.items)).model_dump(mode="json")
    return {
        "resultKey": event.result_key,
        "resultBytes": len(body),
        "success": all(item is not None and item.success for item in result.items),
        "stopped": None,
    }


class SandboxEnvironmentDirty(Exception):
    """Something an earlier invocation left (a process, a file in scratch) could not be removed: this
    execution environment runs no more code, since a leftover would see the next tenant's data."""


def environment_processes(uid: int | None = None) -> list[oslayers.ProcInfo]:
    """Processes an invocation may have left behind; never this process or its ancestors.

    Not root (the sandbox Lambda): every process of this uid. With `uid`: every process of that uid. As
    root with no `uid` (a laptop, tests): this process's descendants running as one of the sandbox's run
    uids only; root owns the host, and other sandboxes' runs are not ours to kill.
    """
    me = os.getpid()
    keep = {me, 0, 1}
    pid = me
    while pid > 1:  # this process's ancestors (the runtime's own parents) are not leftovers
        info = oslayers.proc_info(pid)
        if info is None:
            break
        pid = info.ppid
        keep.add(pid)
    if uid is None and os.geteuid() != 0:
        uid = os.getuid()
    mine = {i.pid for i in oslayers.descendants(me)} if uid is None else None
    found = []
    for pid in oslayers.all_pids():
        if mine is not None and pid not in mine:
            continue
        if pid in keep:
            continue
        uids = oslayers.uids_of(pid)
        # With a uid, that uid alone: run uids elsewhere on the machine are other sandboxes' live runs.
        if uid in uids if uid is not None else any(oslayers.is_run_uid(u) for u in uids):
            info = oslayers.proc_info(pid)
            if info is not None:
                found.append(info)
    return found


def _empty(scratch: Path) -> list[str]:
    left = []
    for entry in list(scratch.iterdir()) if scratch.is_dir() else []:
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError as exc:
            left.append(f"{entry}: {exc.strerror}")
    return left


def clean_environment(scratch: Path, *, uid: int | None = None, deadline_s: float = 5.0) -> list[str]:
    """Kill every leftover process (see `environment_processes`) and empty `scratch`; what is still there."""
    end = time.monotonic() + deadline_s
    while True:
        alive = [p for p in environment_processes(uid) if p.state not in ("Z", "X")]
        for info in alive:
            oslayers.kill_checked(info)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        if not alive or time.monotonic() > end:
            break
        time.sleep(0.01)
    # A zombie holds no memory, file or privilege: it waits for a parent outside the sandbox to reap it.
    left = [f"process {p.pid} ({p.state})" for p in environment_processes(uid) if p.state not in ("Z", "X")]
    left += [f for f in oslayers.sweep_ipc(_ipc_owners(uid)) if f.endswith("(could not be removed)")]
    scratch.mkdir(parents=True, exist_ok=True)
    return left + _empty(scratch)


def _ipc_owners(uid: int | None) -> list[int]:
    """Whose SysV IPC objects an invocation may have left: as `environment_processes` decides for
    processes (this uid when not root; the run uids in use when root)."""
    if uid is not None:
        return [uid]
    if os.geteuid() != 0:
        return [os.getuid()]
    return sorted({u for o in oslayers.ipc_objects() for u in (o.uid, o.cuid) if oslayers.is_run_uid(u)})


def run_in_clean_environment(
    event: SandboxEvent,
    *,
    limits: SandboxLimits,
    scratch: Path,
    uid: int | None = None,
    fetch: Callable[[str, Path], int] = fetch_url,
    s3_client: Callable[[], Any] | None = None,
    deadline_s: float = 5.0,
) -> CodeInvestigation:
    """The sandbox Lambda's invocation: refuse to start while anything of an earlier one is left (after
    trying to remove it), run the event, then kill every other process and empty the scratch again.

    Raises SandboxEnvironmentDirty when the environment cannot be made clean: the caller ends it.
    One invocation at a time per process, as Lambda runs them (tests may call it from several threads).
    """
    return _cleanly(
        lambda: run_event(event, limits=limits, fetch=fetch, s3_client=s3_client, scratch=str(scratch)),
        scratch=scratch,
        uid=uid,
        deadline_s=deadline_s,
    )


def run_batch_in_clean_environment(
    event: SandboxBatchEvent,
    *,
    limits: SandboxLimits,
    scratch: Path,
    remaining_s: Callable[[], float],
    uid: int | None = None,
    fetch: Callable[[str, Path], int] = fetch_url,
    s3_client: Callable[[], Any] | None = None,
    deadline_s: float = 5.0,
) -> SandboxBatchResult:
    """`run_batch_event` inside the same clean-environment wrapper as a single event (`run_in_clean_environment`):
    nothing of an earlier invocation before it, nothing of this one after it."""
    return _cleanly(
        lambda: run_batch_event(
            event,
            limits=limits,
            remaining_s=remaining_s,
            fetch=fetch,
            s3_client=s3_client,
            scratch=str(scratch),
        ),
        scratch=scratch,
        uid=uid,
        deadline_s=deadline_s,
    )


_T = TypeVar("_T")


def _cleanly(work: Callable[[], _T], *, scratch: Path, uid: int | None, deadline_s: float) -> _T:
    with _ONE_INVOCATION:
        left = clean_environment(scratch, uid=uid, deadline_s=deadline_s)
        if left:
            raise SandboxEnvironmentDirty("leftovers of an earlier invocation: " + "; ".join(left[:5]))
        try:
            return work()
        finally:
            clean_environment(scratch, uid=uid, deadline_s=deadline_s)  # the next one refuses leftovers


_ONE_INVOCATION = threading.Lock()


# Error codes Lambda answers an invoke with when the function is at its (reserved) concurrency.
THROTTLE_CODES = frozenset(
    {"TooManyRequestsException", "ThrottlingException", "Throttling", "ThrottledException"}
)


def is_throttle(exc: BaseException) -> bool:
    """A botocore error that says "too many at once" (by its error code or class, never its message)."""
    code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
    return code in THROTTLE_CODES or type(exc).__name__ in THROTTLE_CODES


def full_jitter(cap: float) -> float:
    """A wait drawn uniformly from [0, cap] (AWS's "full jitter": retries of many callers spread out)."""
    return random.uniform(0.0, cap)


class LambdaSandbox:
    """The Sandbox port on AWS: invokes the sandbox function synchronously and returns its CodeInvestigation.

    `presign(data)` turns a DatasetRef into a presigned GET (the function then needs no S3 permission);
    without it the event names the bucket/key/version and the function's role must allow that object.

    The function runs at a reserved concurrency shared by every run of the account: an invoke over it is
    throttled, and a throttle says nothing about the code. It is tried again up to `throttle_retries` times,
    waiting `full_jitter(min(max_delay_s, base_delay_s * 2**n))` before try n+1; only then is the sandbox
    reported unavailable (`SandboxUnavailable`), never as a failed proof.
    """

    def __init__(
        self,
        lambda_client: Any,
        function_name: str,
        *,
        presign: Callable[[DatasetRef], str] | None = None,
        throttle_retries: int = 6,
        base_delay_s: float = 0.5,
        max_delay_s: float = 20.0,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[float], float] = full_jitter,
    ) -> None:
        self.client = lambda_client
        self.function_name = function_name
        self.presign = presign
        self.throttle_retries = max(0, throttle_retries)
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self._sleep = sleep
        self._jitter = jitter

    @classmethod
    def from_settings(
        cls, lambda_client: Any, settings: Any, *, presign: Callable[[DatasetRef], str] | None = None
    ) -> LambdaSandbox:
        """The adapter for `settings.sandbox_function`, with the throttle policy of the settings."""
        if not settings.sandbox_function:
            raise ValueError("ITERATE_SANDBOX_FUNCTION names no sandbox function")
        return cls(
            lambda_client,
            settings.sandbox_function,
            presign=presign,
            throttle_retries=settings.sandbox_throttle_retries,
            base_delay_s=settings.sandbox_throttle_base_s,
            max_delay_s=settings.sandbox_throttle_max_s,
        )

    def event(self, code: str, data: DatasetRef, *, timeout_s: float | None = None) -> SandboxEvent:
        columns = list(data.columns) if data.columns else None
        if self.presign is not None:
            dataset = SandboxDataset(presigned_url=self.presign(data), columns=columns)
        else:
            dataset = SandboxDataset(
                bucket=data.bucket, key=data.key, version_id=data.version_id, columns=columns
            )
        return SandboxEvent(code=code, dataset=dataset, timeout_s=timeout_s)

    def _invoke(self, payload: bytes) -> tuple[dict[str, Any], bytes]:
        """One synchronous invoke, tried again on throttles with capped exponential backoff and full jitter."""
        attempt = 0
        while True:
            try:
                response = self.client.invoke(
                    FunctionName=self.function_name, InvocationType="RequestResponse", Payload=payload
                )
                return response, response["Payload"].read()
            except Exception as exc:  # botocore errors: throttling, networking, permissions
                if not is_throttle(exc) or attempt >= self.throttle_retries:
                    tries = f" after {attempt + 1} tries" if attempt else ""
                    raise SandboxUnavailable(
                        f"sandbox function not reachable{tries}: {type(exc).__name__}: {exc}"
                    ) from exc
                self._sleep(self._jitter(min(self.max_delay_s, self.base_delay_s * 2**attempt)))
                attempt += 1

    def run(self, code: str, data: DatasetRef, *, timeout_s: float | None = None) -> CodeInvestigation:
        payload = self.event(code, data, timeout_s=timeout_s).model_dump(mode="json", exclude_none=True)
        started = time.perf_counter()
        response, body = self._invoke(json.dumps(payload).encode())
        elapsed = round((time.perf_counter() - started) * 1000, 1)
        if response.get("FunctionError"):
            # The function itself died (Lambda timeout, out of memory, crash): a failed attempt, not a run failure.
            detail = _error_message(body)
            stopped: StopReason = "timeout" if "timed out" in detail.lower() else "crash"
            return CodeInvestigation(
                code=code,
                success=False,
                error=f"sandbox function failed: {detail}"[:2000],
                stopped=stopped,
                execution_time_ms=elapsed,
            )
        try:
            return CodeInvestigation.model_validate_json(body)
        except ValueError as exc:
            raise SandboxUnavailable(
                "sandbox function returned something that is not a CodeInvestigation"
            ) from exc


def _error_message(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body[:500].decode("utf-8", "replace")
    if isinstance(data, dict):
        return f"{data.get('errorType', 'Error')}: {data.get('errorMessage', '')}"
    return str(data)[:500]
