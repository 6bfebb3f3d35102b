"""A run's Glue tables removed when it ends early (iterate.aws.engine_tables), over moto's Glue."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from awsenv import REGION
from botocore.exceptions import ClientError

from iterate.aws.engine_tables import cleanup_run_tables, drop_run_tables, glue_names, marks

pytestmark = [pytest.mark.handler, pytest.mark.filterwarnings("ignore:No application metrics")]

DB = "iterate_engine"


def _table(glue: Any, name: str, parameters: dict[str, str]) -> None:
    glue.create_table(DatabaseName=DB, TableInput={"Name": name, "Parameters": parameters})


def test_a_runs_tables_are_dropped_once_and_no_other_owners_or_runs_are(aws: dict[str, Any]) -> None:
    # Given alice's run's tables (the parts, the offsets and 150 small tables: two delete batches), another run
    # of hers whose id starts like it, bob's table under the same stem, and an unmarked table of that stem
    glue = boto3.client("glue", region_name=REGION)
    glue.create_database(DatabaseInput={"Name": DB})
    own = glue_names("r-run1")
    mine = [own["parts"], own["offsets"], *(f"{own['stem']}_keys_{i}_abc" for i in range(150))]
    for name in mine:
        _table(glue, name, marks("alice", "r-run1"))
    kept = {glue_names("r-run10")["parts"], f"{own['stem']}_x_bob", f"{own['stem']}_unmarked"}
    _table(glue, glue_names("r-run10")["parts"], marks("alice", "r-run10"))
    _table(glue, f"{own['stem']}_x_bob", marks("bob", "r-run1"))
    _table(glue, f"{own['stem']}_unmarked", {"classification": "parquet"})
    # When the run's tables are dropped, twice (a retried step)
    first = drop_run_tables(glue, DB, owner="alice", run_id="r-run1")
    second = drop_run_tables(glue, DB, owner="alice", run_id="r-run1")
    # Then exactly its own went, once; the others stay
    assert sorted(first) == sorted(mine) and second == []
    left = set()
    for page in glue.get_paginator("get_tables").paginate(DatabaseName=DB):
        left |= {t["Name"] for t in page["TableList"]}
    assert left == kept
    # And a deployment without the database drops nothing and raises nothing
    assert drop_run_tables(glue, "no_such_database", owner="alice", run_id="r-run1") == []


def test_a_glue_error_while_a_run_ends_is_logged_not_raised() -> None:
    # Given a Glue client that refuses (a role without the grant)
    class Refusing:
        class exceptions:  # the shape of a boto3 client's exceptions
            EntityNotFoundException = type("EntityNotFoundException", (Exception,), {})

        def get_paginator(self, name: str) -> Any:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "GetTables")

    # When the ending step cleans up, Then it goes on with nothing dropped
    assert cleanup_run_tables(Refusing(), DB, owner="alice", run_id="r-run1") == []
