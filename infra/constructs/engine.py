"""The engine path's Athena side: a Glue database for the runs' tables and a workgroup for their statements."""

from __future__ import annotations

import re

from aws_cdk import Aws, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.constructs.storage import ATHENA_OUTPUT
from infra.nag import acknowledge_wildcard

# Athena stops a statement that would scan more than this (its own per-query limit; the run then ends FAILED
# with Athena's error as its reason). A statement reads the Parquet copy's columns it needs once: 1 TB covers
# the copy of the largest upload the engine path takes (ITERATE_ENGINE_MAX_BYTES, 200 GB of CSV) many times.
BYTES_SCANNED_CUTOFF = 10**12
# What the statements read (a run's Parquet parts, its small tables) and write (the UNLOADs' results).
ENGINE_READS = ("artifacts/*/*/*/chunks/parquet/", "artifacts/*/*/*/engine/tables/")
ENGINE_WRITES = ("artifacts/*/*/*/engine/results/", ATHENA_OUTPUT)


class EngineConstruct(Construct):
    """`database` (Glue) holds each run's tables while it runs (EngineStep creates and drops them);
    `workgroup` (Athena) runs the statements, its results encrypted, past BYTES_SCANNED_CUTOFF refused."""

    def __init__(self, scope: Construct, construct_id: str, *, bucket: s3.IBucket) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.bucket = bucket
        self.database_name = re.sub(r"[^a-z0-9_]", "_", f"{stack.stack_name.lower()}_engine")
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.database_name,
                description="Iterate's engine path: each run's Parquet copy and small tables, while it runs",
            ),
        )
        self.workgroup_name = f"{stack.stack_name}-engine"
        self.workgroup = athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=self.workgroup_name,
            description="Iterate's engine path: statements over a run's Parquet copy (RunEngineQuery)",
            recursive_delete_option=True,
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                bytes_scanned_cutoff_per_query=BYTES_SCANNED_CUTOFF,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(selected_engine_version="AUTO"),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=f"s3://{bucket.bucket_name}/{ATHENA_OUTPUT}",
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_S3"
                    ),
                ),
            ),
        )

    @property
    def substitutions(self) -> dict[str, str]:
        """The ASL's `${EngineWorkGroup}` and `${EngineDatabase}`."""
        return {"EngineWorkGroup": self.workgroup_name, "EngineDatabase": self.database_name}

    def _arns(self) -> tuple[str, str, str]:
        stack = Stack.of(self)
        catalog = stack.format_arn(service="glue", resource="catalog")
        database = stack.format_arn(service="glue", resource="database", resource_name=self.database_name)
        tables = stack.format_arn(service="glue", resource="table", resource_name=f"{self.database_name}/*")
        return catalog, database, tables

    def grant_tables(self, role: iam.IRole) -> None:
        """EngineStep (the profile function) creates and drops the run's tables in the database."""
        catalog, database, tables = self._arns()
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["glue:CreateTable", "glue:GetTable", "glue:DeleteTable", "glue:BatchDeleteTable"],
                resources=[catalog, database, tables],
            )
        )
        acknowledge_wildcard(
            role,
            tables,
            "Each run's tables are named by its run id at run time, in this deployment's engine database only.",
        )

    def grant_cleanup(self, role: iam.IRole) -> None:
        """RecordFailure and the execution-status rule (admission) remove the tables of a run that ended before
        EngineStep's last round: they list the run's tables by name and delete those marked with its owner."""
        catalog, database, tables = self._arns()
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["glue:GetTables", "glue:DeleteTable", "glue:BatchDeleteTable"],
                resources=[catalog, database, tables],
            )
        )
        acknowledge_wildcard(
            role,
            tables,
            "A failed run's tables are named by its run id at run time, in this deployment's engine database only.",
        )

    def grant_queries(self, role: iam.IRole) -> None:
        """The state machine runs statements in the workgroup (startQueryExecution.sync), which reads the run's
        tables through Glue and S3 and writes the results: Athena acts with the caller's rights."""
        stack = Stack.of(self)
        workgroup = stack.format_arn(
            service="athena", resource="workgroup", resource_name=self.workgroup_name
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "athena:StartQueryExecution",
                    "athena:GetQueryExecution",
                    "athena:StopQueryExecution",
                ],
                resources=[workgroup],
            )
        )
        catalog, database, tables = self._arns()
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["glue:GetDatabase", "glue:GetTable", "glue:GetTables", "glue:GetPartitions"],
                resources=[catalog, database, tables],
            )
        )
        acknowledge_wildcard(
            role, tables, "The run's tables, named at run time, in the engine database only."
        )
        reads = [self.bucket.arn_for_objects(f"{p}*") for p in ENGINE_READS]
        writes = [self.bucket.arn_for_objects(f"{p}*") for p in ENGINE_WRITES]
        role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=reads))
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
                resources=writes,
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket", "s3:GetBucketLocation"],
                resources=[self.bucket.bucket_arn],
            )
        )
        for arn in (*reads, *writes):
            acknowledge_wildcard(
                role,
                arn,
                "Athena reads a run's Parquet copy and small tables and writes its statements' results under "
                "the run's prefix (owner/dataset/run at run time), with the state machine's rights.",
            )
