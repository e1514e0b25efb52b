"""Cron schedules in time zones (gateway/agents/schedule.py): the next occurrence, daylight saving either way,
and a late firing's occurrence."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from gateway.agents.automations import MISFIRE_GRACE_S, firing
from gateway.agents.schedule import BadSchedule, Cron
from gateway.storage.automation_store import Automation

NEW_YORK = ZoneInfo("America/New_York")


def local(*parts: int, fold: int = 0) -> float:
    return dt.datetime(*parts, tzinfo=NEW_YORK, fold=fold).timestamp()  # type: ignore[misc]


def walk(cron: Cron, start: float, count: int) -> list[str]:
    found, at = [], start
    for _ in range(count):
        at = cron.after(at)
        found.append(dt.datetime.fromtimestamp(at, NEW_YORK).isoformat())
    return found


def test_a_daily_job_in_the_hour_clocks_repeat_runs_once() -> None:
    cron = Cron.parse("30 1 * * *", "America/New_York")
    assert walk(cron, local(2026, 10, 31, 12), 3) == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-02T01:30:00-05:00",
        "2026-11-03T01:30:00-05:00",
    ]


def test_an_hourly_job_runs_in_both_passes_of_the_repeated_hour() -> None:
    cron = Cron.parse("0 * * * *", "America/New_York")
    assert walk(cron, local(2026, 11, 1, 0, 30), 3) == ["2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"]


def test_a_job_in_the_hour_clocks_skip_runs_after_it() -> None:
    cron = Cron.parse("30 2 * * *", "America/New_York")
    assert walk(cron, local(2026, 3, 7, 12), 2) == ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"]


def test_a_late_firing_fires_the_latest_missed_occurrence() -> None:
    cron = Cron.parse("*/5 * * * *", "UTC")
    due = dt.datetime(2026, 1, 1, 10, 0, tzinfo=dt.UTC).timestamp()
    now = due + 3 * 3600 + 7 * 60  # down for three hours
    assert cron.latest(due, now) == due + 3 * 3600 + 5 * 60
    per_second = Cron.parse("* * * * * *", "UTC")
    assert per_second.latest(due, due + 86_400.5) == due + 86_400  # a day of seconds missed: a jump, not a walk


@pytest.mark.parametrize(
    "expression, timezone, wrong",
    [
        ("61 * * * *", "UTC", "expression"),
        ("* *", "UTC", "expression"),
        ("0 9 * * *", "Nowhere/Else", "timezone"),
        ("0 9 * * *", "../etc", "timezone"),
    ],
)
def test_what_cannot_be_scheduled_is_refused(expression: str, timezone: str, wrong: str) -> None:
    with pytest.raises(BadSchedule) as refused:
        Cron.parse(expression, timezone)
    assert str(refused.value).startswith(wrong)


def test_a_moment_late_fires_its_own_occurrence_and_long_late_only_the_latest() -> None:
    cron = Cron.parse("*/2 * * * * *", "UTC")
    due = 1_800_000_000.0
    body: dict[str, Any] = {
        "type": "periodic",
        "expression": cron.expression,
        "timezone": "UTC",
        "target": {"type": "existing_session", "session_id": "s"},
    }
    automation = Automation("auto_1", "t", 0, "active", None, due, "s", body)
    late = firing(automation, due + 3.5)  # a slow pass: this occurrence, the next one caught up at once
    assert (late.scheduled_at, late.next_run_at) == (due, due + 2)
    down = firing(automation, due + MISFIRE_GRACE_S + 61)  # a gateway that was down: the latest alone
    assert (down.scheduled_at, down.next_run_at) == (due + MISFIRE_GRACE_S + 60, due + MISFIRE_GRACE_S + 62)
