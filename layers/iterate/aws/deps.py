"""What a step needs from AWS, gathered once per container and passed in (tests build it over moto)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from iterate.aws import clients, cost
from iterate.aws.config import AwsConfig, get_aws_config
from iterate.settings import Settings, get_settings


@dataclass
class AwsDeps:
    """Clients left as None are created on first use, so a function only pays for the clients it uses."""

    settings: Settings
    config: AwsConfig
    s3: Any = None
    table: Any = None
    events: Any = None
    stepfunctions: Any = None
    scheduler: Any = None
    lambda_: Any = None
    sqs: Any = None
    glue: Any = None
    sts: Any = None
    secret_provider: Any = None  # None: Powertools parameters (Secrets Manager)
    agents_factory: Callable[[Settings], Any] | None = None  # None: iterate.agents.build_agents
    work_dir: str = "/tmp"  # Lambda's only writable place
    clock: Callable[[], float] = field(default=time.time)

    _watched: set[int] = field(default_factory=set, repr=False, init=False)
    # Clients acting as an owner's role (iterate.aws.sources), by (role, owner): (expiry, client).
    source_clients: dict[tuple[str, str], tuple[float, Any]] = field(
        default_factory=dict, repr=False, init=False
    )

    def _metered(self, client: Any) -> Any:
        """Count the client's calls for the run's infrastructure estimate (iterate.aws.cost), once per client."""
        if id(client) not in self._watched:
            cost.watch(client)
            self._watched.add(id(client))
        return client

    def s3_client(self) -> Any:
        if self.s3 is None:
            self.s3 = clients.client("s3")
        return self._metered(self.s3)

    def dynamo_table(self) -> Any:
        if self.table is None:
            self.table = clients.dynamodb_table(self.config.need("table"))
        return self._metered(self.table)

    def events_client(self) -> Any:
        if self.events is None:
            self.events = clients.client("events")
        return self._metered(self.events)

    def sfn_client(self) -> Any:
        if self.stepfunctions is None:
            self.stepfunctions = clients.client("stepfunctions")
        return self.stepfunctions

    def lambda_client(self) -> Any:
        if self.lambda_ is None:
            self.lambda_ = clients.client("lambda")
        return self.lambda_

    def sqs_client(self) -> Any:
        if self.sqs is None:
            self.sqs = clients.client("sqs")
        return self.sqs

    def sts_client(self) -> Any:
        if self.sts is None:
            self.sts = clients.client("sts")
        return self.sts

    def glue_client(self) -> Any:
        if self.glue is None:
            self.glue = clients.client("glue")
        return self.glue

    def scheduler_client(self) -> Any:
        if self.scheduler is None:
            self.scheduler = clients.client("scheduler")
        return self.scheduler


def build_deps(*, settings: Settings | None = None, config: AwsConfig | None = None) -> AwsDeps:
    """The container's dependencies, read from its environment on first use (never at import)."""
    return AwsDeps(settings=settings or get_settings(), config=config or get_aws_config())
