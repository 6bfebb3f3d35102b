"""POST /runs/{id}/fixes on AWS: the fix engine on a finished run's input, written as a new dataset version under
versions/<owner>/<dataset>/<version>/ with its lineage in DynamoDB. The run's input object is only read.

The route checks what it can without the data (`check_fix_request`: the issues, the answers, the confirmations the
run's evidence calls for) and records a fix job; the fix worker, invoked asynchronously, does the data work
(`run_fix_job`) and records how it ended: API Gateway's 29 s never bound the size of a fix."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iterate.aws.deps import AwsDeps
from iterate.aws.payloads import S3ObjectRef, artifacts_prefix
from iterate.aws.sources import content_identity, source_client
from iterate.contracts import AnalysisResult, FixAction, FollowupTurn, SmartFixFollowup
from iterate.contracts.base import Contract
from iterate.fix import (
    DESTRUCTIVE,
    Chosen,
    FixError,
    Prepared,
    choose,
    fix_input,
    needs_confirmation,
    write_version_dir,
)
from iterate.fix.version import RunInput, sha256_of
from iterate.storage.dynamo import DynamoRunRepository

VERSIONS_PREFIX = "versions/"


class UnconfirmedFixError(FixError):
    """A destructive fix asked for without its confirmation: nothing was written."""


class FixJob(Contract):
    """The fix worker's event: which job to run (its request is in the job's record, not in the event)."""

    owner: str
    runId: str
    fixId: str


class FixJobOutput(Contract):
    fixId: str
    status: str


@dataclass(frozen=True)
class WrittenVersion:
    record: dict[str, Any]  # the DatasetVersion fields
    source: S3ObjectRef  # the fixed file, for the run started on it


def versions_prefix(owner: str, dataset_id: str, version_id: str) -> str:
    return f"{VERSIONS_PREFIX}{owner}/{dataset_id}/{version_id}/"


def _answered(
    repo: DynamoRunRepository, run_id: str, analysis: AnalysisResult, answers: dict[str, str]
) -> Any:
    """The `answered` of iterate.fix.choose from the run's stored follow-ups, with the request's answers applied
    the way `iterate followup --answer` applies them (the offline agent asks any question still needed)."""
    from iterate.agents import FollowupError, followup
    from iterate.agents.offline.followup import OfflineFollowupAgent

    by_id = {i.id: i for i in analysis.issues}
    agent = OfflineFollowupAgent()

    def answered(issue_id: str) -> tuple[FixAction | None, list[str], bool]:
        turns = repo.list_followups(f"{run_id}.{issue_id}")
        history = [
            FollowupTurn(question=SmartFixFollowup.model_validate(t["question"]), answer=t.get("answer"))
            for t in turns
        ]
        answer = answers.get(issue_id)
        if answer is None and not history:
            return None, [], False
        try:
            step = followup(agent, by_id[issue_id], history, answer)
        except FollowupError as exc:
            raise FixError(f"{issue_id}: {exc}") from exc
        given = [t.answer for t in step.history if t.answer is not None]
        return step.action, given, True

    return answered


def apply_fixes_to_run(
    deps: AwsDeps,
    repo: DynamoRunRepository,
    run: dict[str, Any],
    *,
    issues: list[str],
    answers: dict[str, str],
    quick: bool,
    confirm: set[str],
) -> WrittenVersion:
    """Fix a SUCCEEDED run's input into a new version in the data bucket and record it; FixError when the
    request cannot be applied, UnconfirmedFixError when a destructive fix lacks its confirmation."""
    from iterate.aws.steps import _download

    bucket = deps.config.need("bucket")
    unknown = [k for k in answers if k not in issues and issues]
    if unknown:
        raise FixError(f"an answer is given for {unknown[0]!r}, which is not among the issues to fix")
    # A run the API queued has no artifactsPrefix on its record: its artifacts are where every run's are.
    prefix = str(
        run.get("artifactsPrefix") or artifacts_prefix(repo.owner, str(run["datasetId"]), str(run["runId"]))
    )
    source = S3ObjectRef.model_validate(run["source"])
    s3 = deps.s3_client()
    work = Path(tempfile.mkdtemp(prefix="iterate-fix-", dir=deps.work_dir))
    try:
        analysis = AnalysisResult.model_validate_json(
            s3.get_object(Bucket=bucket, Key=prefix + "analysis.json")["Body"].read()
        )
        flags = work / "flags.csv"
        s3.download_file(bucket, prefix + "flags.csv", str(flags))
        name = source.key.rsplit("/", 1)[-1]
        local = work / "input" / name
        local.parent.mkdir()
        source_s3 = source_client(deps, source, repo.owner)
        _download(deps, source, local, s3=source_s3)
        digest = sha256_of(local)
        label = f"s3://{source.bucket}/{source.key}" + (
            f"?versionId={source.versionId}" if source.versionId else ""
        )
        run_input = RunInput(
            path=local, sha256=digest, analysis=analysis, name=name, label=label, run_id=str(run["runId"])
        )
        expected = analysis.run.contentHash if analysis.run is not None else None
        same = expected is not None and digest == expected
        if expected is not None and expected.startswith("s3-"):  # the engine path's identity: S3's checksum
            extra = {"VersionId": source.versionId} if source.versionId else {}
            head = source_s3.head_object(
                Bucket=source.bucket, Key=source.key, ChecksumMode="ENABLED", **extra
            )
            same = content_identity(head) == expected
        if not same:
            raise FixError("the run's input object is not the one the run read: start a new run first")
        chosen, notes = choose(
            analysis.issues,
            issues,
            quick,
            _answered(repo, str(run["runId"]), analysis, answers),
            lambda issue_id: f"POST /issues/{run['runId']}.{issue_id}/followup",
        )
        prepared = fix_input(run_input, chosen, notes, flags)
        unconfirmed = needs_confirmation(prepared.result, prepared.steps, confirm)
        if unconfirmed:
            raise UnconfirmedFixError(_impact(prepared, unconfirmed))
        version_id = (
            "v" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(deps.clock())) + "-" + uuid.uuid4().hex[:8]
        )
        out = work / "version"
        target, body = write_version_dir(out, prepared, version_id)
        key_prefix = versions_prefix(repo.owner, str(run["datasetId"]), version_id)
        put: dict[str, str] = {}
        for path in (target, out / "changes.csv", out / "version.json"):
            response = s3.put_object(Bucket=bucket, Key=key_prefix + path.name, Body=path.read_bytes())
            put[path.name] = str(response.get("VersionId") or "")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record = {
        "versionId": version_id,
        "datasetId": str(run["datasetId"]),
        "createdAt": body["createdAt"],
        "parentRunId": str(run["runId"]),
        "parentSha256": digest,
        "parentKey": source.key,
        "key": key_prefix + target.name,
        "changesKey": key_prefix + "changes.csv",
        "sha256": body["sha256"],
        "format": body["format"],
        "rows": body["rows"],
        "columns": body["columns"],
        "issuesApplied": [c.issue.id for c in chosen],
        "counts": body["counts"],
        "answers": json.dumps(body["answers"]),
    }
    repo.put_version(str(run["datasetId"]), record)
    ref = S3ObjectRef(bucket=bucket, key=record["key"], versionId=put[target.name] or None)
    return WrittenVersion(record=record, source=ref)


def _impact(prepared: Prepared, unconfirmed: list[Any]) -> str:
    counts = prepared.result.counts
    parts = [
        f"{s.issue_id}: {s.action.action} {counts.get(s.issue_id, {}).get(s.action.action, 0)}"
        for s in unconfirmed
    ]
    kinds = sorted({"drop" if s.action.action.startswith("drop") else "clear" for s in unconfirmed})
    return f"these fixes remove data ({'; '.join(parts)}); nothing was written — send confirm: {kinds} to apply them"


def _analysis(deps: AwsDeps, repo: DynamoRunRepository, run: dict[str, Any]) -> tuple[str, AnalysisResult]:
    # A run the API queued has no artifactsPrefix on its record: its artifacts are where every run's are.
    prefix = str(
        run.get("artifactsPrefix") or artifacts_prefix(repo.owner, str(run["datasetId"]), str(run["runId"]))
    )
    body = deps.s3_client().get_object(Bucket=deps.config.need("bucket"), Key=prefix + "analysis.json")[
        "Body"
    ]
    return prefix, AnalysisResult.model_validate_json(body.read())


def check_fix_request(
    deps: AwsDeps,
    repo: DynamoRunRepository,
    run: dict[str, Any],
    *,
    issues: list[str],
    answers: dict[str, str],
    quick: bool,
    confirm: set[str],
) -> list[Chosen]:
    """What the route can refuse before any data is read (FixError, UnconfirmedFixError): unknown issues, smart
    fixes without an answer, answers that are no option, and destructive fixes the run's evidence says remove
    data without their confirmation. The worker checks the confirmations again on the real counts."""
    unknown = [k for k in answers if k not in issues and issues]
    if unknown:
        raise FixError(f"an answer is given for {unknown[0]!r}, which is not among the issues to fix")
    _, analysis = _analysis(deps, repo, run)
    chosen, _ = choose(
        analysis.issues,
        issues,
        quick,
        _answered(repo, str(run["runId"]), analysis, answers),
        lambda issue_id: f"POST /issues/{run['runId']}.{issue_id}/followup",
    )
    unconfirmed = []
    for c in chosen:
        kind = DESTRUCTIVE.get(c.action.action)
        rows = c.issue.evidence.affectedRows if c.issue.evidence else c.issue.affectedRows
        if kind and kind not in confirm and (rows is None or rows > 0):
            unconfirmed.append((c, kind, rows))
    if unconfirmed:
        parts = [f"{c.issue.id}: {c.action.action} (about {rows} rows)" for c, _, rows in unconfirmed]
        kinds = sorted({kind for _, kind, _ in unconfirmed})
        raise UnconfirmedFixError(
            f"these fixes remove data ({'; '.join(parts)}); nothing was written — send confirm: {kinds} to apply them"
        )
    return chosen


def run_fix_job(job: FixJob, deps: AwsDeps) -> FixJobOutput:
    """Apply a recorded fix job and record how it ended. A request the data refuses (FixError) ends FAILED with
    its reason; anything else ends FAILED too and is raised (the invocation fails: the worker's alarm and
    dead-letter queue). A job that is not PENDING (a duplicate delivery) is left as it is."""
    from iterate.aws.observability import logger, metrics
    from iterate.aws.runs import queue_run
    from iterate.storage.dynamo import RunTransitionError

    logger.append_keys(owner=job.owner, run_id=job.runId, fix_id=job.fixId)
    repo = DynamoRunRepository(deps.dynamo_table(), job.owner, clock=deps.clock)
    now = lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deps.clock()))  # noqa: E731
    try:
        repo.transition_fix(job.runId, job.fixId, from_status="PENDING", to_status="RUNNING", startedAt=now())
    except RunTransitionError:
        found = repo.get_fix(job.runId, job.fixId)
        logger.warning("fix job not pending: left as it is", status=(found or {}).get("status"))
        return FixJobOutput(fixId=job.fixId, status=str((found or {}).get("status", "MISSING")))
    record = repo.get_fix(job.runId, job.fixId) or {}
    request = record.get("request") or {}
    run = repo.get_run(job.runId)
    try:
        if run is None or run.get("status") != "SUCCEEDED":
            raise FixError(f"run {job.runId} no longer exists or has not succeeded: nothing to fix")
        written = apply_fixes_to_run(
            deps,
            repo,
            run,
            issues=list(request.get("issues") or []),
            answers=dict(request.get("answers") or {}),
            quick=bool(request.get("quick")),
            confirm=set(request.get("confirm") or []),
        )
    except FixError as exc:
        repo.transition_fix(
            job.runId, job.fixId, from_status="RUNNING", to_status="FAILED",
            error=type(exc).__name__, reason=str(exc), completedAt=now(),
        )  # fmt: skip
        logger.info("fix refused by the data", error=type(exc).__name__)
        metrics.add_metric(name="FixesFailedUser", unit="Count", value=1)
        return FixJobOutput(fixId=job.fixId, status="FAILED")
    except Exception as exc:
        _fail_internal(repo, job, exc, now())
        raise
    dataset_id = str(run["datasetId"])
    version_id = str(written.record["versionId"])
    new_run = f"r{uuid.uuid4().hex[:24]}"
    try:
        # Queued for admission like any run; over a daily quota it is recorded FAILED (nobody is there for a 429).
        queue_run(deps, repo, dataset_id, new_run, written.source, run.get("instructions"), on_quota="record")
        repo.set_version_run(dataset_id, version_id, new_run)
    except Exception as exc:
        _fail_internal(repo, job, exc, now(), version_id=version_id)
        raise
    repo.transition_fix(
        job.runId, job.fixId, from_status="RUNNING", to_status="SUCCEEDED",
        versionId=version_id, newRunId=new_run, completedAt=now(),
    )  # fmt: skip
    logger.info("fix applied", version_id=version_id, new_run_id=new_run)
    metrics.add_metric(name="FixesSucceeded", unit="Count", value=1)
    return FixJobOutput(fixId=job.fixId, status="SUCCEEDED")


def _fail_internal(
    repo: DynamoRunRepository, job: FixJob, exc: Exception, at: str, *, version_id: str | None = None
) -> None:
    from iterate.aws.observability import logger, metrics

    written = f"version {version_id} was written but no run was started on it; " if version_id else ""
    reason = (
        f"{written}the fix stopped on an internal error ({type(exc).__name__}): send the request again; "
        "if it fails the same way, the fix worker's logs name the cause"
    )
    repo.transition_fix(
        job.runId, job.fixId, from_status="RUNNING", to_status="FAILED",
        error=type(exc).__name__, reason=reason, completedAt=at, **({"versionId": version_id} if version_id else {}),
    )  # fmt: skip
    logger.exception("fix failed", error=type(exc).__name__)
    metrics.add_metric(name="FixesFailedSystem", unit="Count", value=1)
