"""POST /runs/{id}/fixes on AWS: the fix engine on a finished run's input, written as a new dataset version under
versions/<owner>/<dataset>/<version>/ with its lineage in DynamoDB. The run's input object is only read."""

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
from iterate.contracts import AnalysisResult, FixAction, FollowupTurn, SmartFixFollowup
from iterate.fix import FixError, Prepared, choose, fix_input, needs_confirmation, write_version_dir
from iterate.fix.version import RunInput, sha256_of
from iterate.storage.dynamo import DynamoRunRepository

VERSIONS_PREFIX = "versions/"


class UnconfirmedFixError(FixError):
    """A destructive fix asked for without its confirmation: nothing was written."""


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
        _download(deps, source, local)
        digest = sha256_of(local)
        label = f"s3://{source.bucket}/{source.key}" + (
            f"?versionId={source.versionId}" if source.versionId else ""
        )
        run_input = RunInput(
            path=local, sha256=digest, analysis=analysis, name=name, label=label, run_id=str(run["runId"])
        )
        if analysis.run is None or digest != analysis.run.contentHash:
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
