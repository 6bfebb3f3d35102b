"""Big files in: multipart uploads past the presigned POST's 5 GB (iterate.aws.uploads: start, complete,
abort), and runs on an object already in the owner's bucket, read through a role they grant
(iterate.aws.sources)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from pydantic import Field

from iterate.api.common import PRESIGN_UPLOAD_S, UnprocessableError, owner_of, responses, start_run_on
from iterate.api.models import FILE_NAME_PATTERN, Run
from iterate.aws import uploads
from iterate.aws.payloads import S3ObjectRef
from iterate.aws.sources import ROLE_ARN, S3_URI, SourceAccessError, external_id, parse_s3_uri, source_client
from iterate.contracts.base import Contract
from iterate.engine.route import ENGINE_FORMATS


class MultipartUploadRequest(Contract):
    size: int = Field(ge=1, description="the file's size in bytes (it sets the part size and count)")


class PartTarget(Contract):
    partNumber: int
    url: str = Field(description="presigned PUT of this part's bytes, with its x-amz-checksum-sha256 header")


class MultipartUpload(Contract):
    uploadId: str
    key: str
    partBytes: int = Field(description="part n holds the file's bytes [(n-1)·partBytes, n·partBytes)")
    parts: list[PartTarget]
    expiresIn: int
    maxBytes: int = Field(description="the largest file a run of this dataset takes")
    checksumHeader: str = Field(
        default=uploads.CHECKSUM_HEADER, description="send each part's base64 SHA-256 in this header"
    )


class CompleteUploadRequest(Contract):
    partCount: int = Field(
        ge=1, le=uploads.MAX_PARTS, description="how many parts were sent: S3 must hold every one of them"
    )


class ImportRequest(Contract):
    uri: str = Field(
        max_length=1100,
        pattern=S3_URI.pattern,
        description="s3://bucket/key of the file in the owner's bucket",
    )
    roleArn: str = Field(
        max_length=600,
        pattern=ROLE_ARN.pattern,
        description="a role in the owner's account that Iterate may assume with sts:ExternalId iterate-<owner> "
        "(the caller's user id) and that may s3:GetObject the file",
    )


class CompletedUpload(Contract):
    key: str
    versionId: str | None = None
    etag: str
    checksumSha256: str | None = Field(
        default=None, description="S3's SHA-256 of the parts' checksums ('-N'): the run's content identity"
    )
    size: int


def max_upload_bytes(file_name: str, settings: Any) -> int:
    """What a run of this file takes: ITERATE_ENGINE_MAX_BYTES for a delimited text file the engine path reads
    (no process holds the table), ITERATE_MAX_FILE_BYTES for any other."""
    engine = settings.engine != "never" and any(file_name.lower().endswith(s) for s in ENGINE_FORMATS)
    return max(settings.engine_max_bytes, settings.max_file_bytes) if engine else settings.max_file_bytes


def register_uploads(
    app: APIGatewayRestResolver,
    get_deps: Callable[[], Any],
    require_dataset: Callable[[str], dict[str, Any]],
    repo: Callable[[], Any],
) -> None:
    @app.post(
        "/datasets/<dataset_id>/imports",
        summary="Analyse a file already in the owner's bucket, read where it is through a role the owner grants",
        responses=responses(202, Run, 404),
    )
    def import_object(dataset_id: str, body: ImportRequest) -> tuple[Run, int]:
        from botocore.exceptions import ClientError

        deps = get_deps()
        owner = owner_of(app)
        require_dataset(dataset_id)
        bucket, key = parse_s3_uri(body.uri)
        if re.match(FILE_NAME_PATTERN, key.rsplit("/", 1)[-1]) is None:
            raise UnprocessableError(
                "the file's name must end in .csv, .tsv, .txt, .parquet, .jsonl, .json or .xlsx", field="uri"
            )
        source = S3ObjectRef(bucket=bucket, key=key, roleArn=body.roleArn)
        try:
            head = source_client(deps, source, owner).head_object(Bucket=bucket, Key=key)
        except SourceAccessError as exc:
            raise UnprocessableError(str(exc), field="roleArn") from None
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            raise UnprocessableError(
                f"the role cannot read {body.uri} ({code}): it must allow s3:GetObject on it (external id "
                f"{external_id(owner)!r})",
                field="uri",
            ) from None
        size, allowed = int(head["ContentLength"]), max_upload_bytes(key, deps.settings)
        if size > allowed:
            raise UnprocessableError(
                f"the file is {size:,} bytes, more than the {allowed:,} a run takes", field="uri"
            )
        version = head.get("VersionId")
        imported = source
        if version and version != "null":  # the run reads this exact version, as for an upload
            source = source.model_copy(update={"versionId": version})
        run_id = f"r{uuid.uuid4().hex[:24]}"
        r = repo()
        queued = start_run_on(deps, r, owner, dataset_id, run_id, source, None)
        # The import is the dataset's source from now on (until a newer upload or import): its schedule and
        # POST …/runs re-analyse the object at this URI, read through the same role, as it is when they run.
        r.record_upload(dataset_id, imported.model_dump(mode="json", exclude_none=True))
        return queued, 202

    @app.post(
        "/datasets/<dataset_id>/uploads",
        summary="Start a multipart upload of the dataset's file (any size a run takes): one presigned PUT per part",
        responses=responses(201, MultipartUpload, 404),
    )
    def start_upload(dataset_id: str, body: MultipartUploadRequest) -> tuple[MultipartUpload, int]:
        deps = get_deps()
        key = str(require_dataset(dataset_id)["uploadKey"])
        allowed = max_upload_bytes(key, deps.settings)
        if body.size > allowed:
            raise UnprocessableError(
                f"the file is {body.size:,} bytes, more than the {allowed:,} a run of it takes "
                "(ITERATE_ENGINE_MAX_BYTES for a CSV/TSV, ITERATE_MAX_FILE_BYTES otherwise)",
                field="size",
            )
        started = uploads.start_upload(
            deps.s3_client(), deps.config.need("bucket"), key, body.size, expires_s=PRESIGN_UPLOAD_S
        )
        return MultipartUpload(**started, maxBytes=allowed), 201

    @app.post(
        "/datasets/<dataset_id>/uploads/<upload_id>/complete",
        summary="Complete a multipart upload from its parts' ETags and checksums (the run starts on the object)",
        responses=responses(200, CompletedUpload, 404),
    )
    def complete_upload(dataset_id: str, upload_id: str, body: CompleteUploadRequest) -> CompletedUpload:
        deps = get_deps()
        key = str(require_dataset(dataset_id)["uploadKey"])
        try:
            done = uploads.complete_upload(
                deps.s3_client(), deps.config.need("bucket"), key, upload_id, part_count=body.partCount
            )
        except uploads.PartsMissingError as exc:
            raise UnprocessableError(str(exc), field="partCount") from None
        return CompletedUpload(**done)

    @app.delete(
        "/datasets/<dataset_id>/uploads/<upload_id>",
        summary="Abort a multipart upload: the parts sent so far are dropped",
        responses=responses(204, None, 404),
    )
    def abort_upload(dataset_id: str, upload_id: str) -> Response[Any]:
        deps = get_deps()
        key = str(require_dataset(dataset_id)["uploadKey"])
        uploads.abort_upload(deps.s3_client(), deps.config.need("bucket"), key, upload_id)
        return Response(status_code=204)
