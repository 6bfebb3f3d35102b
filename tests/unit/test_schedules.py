"""How often a schedule expression fires (what the API's minimum interval is checked against)."""

from __future__ import annotations

import pytest

from iterate.aws.schedules import ScheduleTooFrequentError, check_interval, shortest_interval_minutes


@pytest.mark.parametrize(
    ("expression", "minutes"),
    [
        ("rate(1 minute)", 1),
        ("rate(5 minutes)", 5),
        ("rate(2 hours)", 120),
        ("rate(1 day)", 1440),
        ("cron(* * * * ? *)", 1),
        ("cron(*/10 * * * ? *)", 10),
        ("cron(0,15 * * * ? *)", 15),
        ("cron(0,50 * * * ? *)", 10),  # 50 → the next hour's 0 is 10 minutes
        ("cron(0 * * * ? *)", 60),
        ("cron(0 6,18 * * ? *)", 720),
        ("cron(0 6 * * ? *)", 1440),
        ("cron(0 9-17 ? * MON-FRI *)", 60),
    ],
)
def test_the_shortest_interval_of_rates_and_crons(expression: str, minutes: int) -> None:
    assert shortest_interval_minutes(expression) == minutes


def test_too_frequent_schedules_are_refused_with_what_to_use() -> None:
    with pytest.raises(ScheduleTooFrequentError, match=r"fires every 1 minute; .* rate\(60 minutes\)"):
        check_interval("rate(1 minute)", 60)
    check_interval("rate(1 hour)", 60)
    with pytest.raises(ValueError, match="not a rate"):
        shortest_interval_minutes("every day")
