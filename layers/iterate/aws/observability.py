"""The one place that owns Powertools Logger, Tracer and Metrics for every function."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

# Powertools reads POWERTOOLS_SERVICE_NAME / _METRICS_NAMESPACE / _LOG_LEVEL when these are built; handlers
# share these instances so keys appended in the engine glue show up in the handler's log lines.
logger = Logger(service="iterate")
tracer = Tracer(service="iterate")
metrics = Metrics(namespace="Iterate", service="iterate")
