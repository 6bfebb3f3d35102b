"""How often a schedule expression fires, so the API and the CDK app can refuse schedules that run too often."""

from __future__ import annotations

import hashlib
import itertools
import re

# No deployment may allow schedules more often than this (a re-analysis every minute only burns money and
# run slots); a deployment sets its own minimum at or above it (StackConfig.min_schedule_minutes).
SCHEDULE_FLOOR_MINUTES = 5
DEFAULT_MIN_SCHEDULE_MINUTES = 60

_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_MINUTES = {"minute": 1, "hour": 60, "day": 1440}


class ScheduleTooFrequentError(ValueError):
    """The expression fires more often than the deployment's minimum interval."""


def _field_gap(field: str, span: int) -> int | None:
    """The shortest gap between two firings a cron field allows within its span (None: it fires once)."""
    if field in ("*", "?"):
        return 1
    if "/" in field:
        step = field.split("/", 1)[1]
        return int(step) if step.isdigit() and int(step) > 0 else 1
    values: set[int] = set()
    for part in field.split(","):
        if "-" in part:
            low, _, high = part.partition("-")
            if low.isdigit() and high.isdigit():
                values.update(range(int(low), int(high) + 1))
            else:
                return 1
        elif part.isdigit():
            values.add(int(part))
        else:
            return 1  # names, L, W, #: be strict, treat as every unit
    if len(values) <= 1:
        return None
    ordered = sorted(values)
    gaps = [b - a for a, b in itertools.pairwise(ordered)]
    gaps.append(span - ordered[-1] + ordered[0])  # around the wrap
    return min(gaps)


def shortest_interval_minutes(expression: str) -> int:
    """The shortest time between two firings of an EventBridge Scheduler `rate(...)` or `cron(...)` expression
    (conservative for cron: the minute and hour fields decide; a schedule firing at most once a day is 1440)."""
    m = _RATE.match(expression.strip())
    if m:
        return int(m.group(1)) * _UNIT_MINUTES[m.group(2).rstrip("s")]
    if expression.startswith("cron(") and expression.endswith(")"):
        fields = expression[5:-1].split()
        if len(fields) == 6:
            minute = _field_gap(fields[0], 60)
            if minute is not None:
                return minute
            hour = _field_gap(fields[1], 24)
            if hour is not None:
                return hour * 60
            return 1440
    raise ValueError(f"{expression!r} is not a rate(...) or cron(...) expression with 6 fields")


def check_interval(expression: str, minimum_minutes: int) -> None:
    """Raise ScheduleTooFrequentError (saying what and what to do) when `expression` fires too often."""
    every = shortest_interval_minutes(expression)
    if every < minimum_minutes:
        raise ScheduleTooFrequentError(
            f"{expression} fires every {every} minute{'s' if every != 1 else ''}; this deployment allows at most "
            f"one run every {minimum_minutes} minutes: use e.g. rate({minimum_minutes} minutes) or a cron "
            "expression with fewer firings"
        )


def schedule_name(owner: str, dataset_id: str) -> str:
    """The EventBridge Scheduler name of a dataset's schedule (one per owner and dataset)."""
    # Scheduler names are ≤ 64 chars of [0-9A-Za-z-_.]: hash the owner rather than trusting its characters.
    return f"iterate-{hashlib.sha256(owner.encode()).hexdigest()[:16]}-{dataset_id}"[:64]
