"""When a periodic automation is due: its cron expression in its IANA time zone (croniter), with the daylight
saving rule cron itself keeps. A standard five-field expression (minute hour day month weekday); a sixth field
in front is seconds (as Quartz and Spring write it), for schedules finer than a minute.

Clocks going forward skip the hour: a job set inside it runs at the hour after. Clocks going back repeat an
hour: a job set to a fixed hour runs once (the first time), one for every hour (`*` hours) runs in both."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

MAX_EXPRESSION = 256


class BadSchedule(ValueError):
    """An expression or time zone that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Cron:
    expression: str
    zone: ZoneInfo

    @classmethod
    def parse(cls, expression: str, timezone: str) -> Cron:
        fields = expression.split()
        if len(expression) > MAX_EXPRESSION or len(fields) not in (5, 6):
            raise BadSchedule("expression must be a five-field cron expression (minute hour day month weekday).")
        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise BadSchedule(f"timezone '{timezone[:64]}' is not an IANA time zone.") from None
        cron = cls(" ".join(fields), zone)
        try:
            cron.after(0.0)
        except (CroniterError, ValueError, KeyError):
            raise BadSchedule("expression is not a valid cron expression.") from None
        return cron

    @property
    def _seconds(self) -> bool:
        return len(self.expression.split()) == 6

    @property
    def _every_hour(self) -> bool:
        return self.expression.split()[2 if self._seconds else 1] == "*"

    def after(self, moment: float) -> float:
        """The first occurrence strictly after `moment` (a Unix time)."""
        start = dt.datetime.fromtimestamp(moment, self.zone)
        occurrences = croniter(self.expression, start, second_at_beginning=self._seconds)
        for _ in range(64):
            found: dt.datetime = occurrences.get_next(dt.datetime)
            if not (found.fold and not self._every_hour):  # the repeated hour's second pass: run once
                return found.timestamp()
        raise BadSchedule("expression has no next occurrence.")

    def latest(self, due: float, now: float) -> float:
        """The last occurrence from `due` (the first one missed) up to `now`: what firing late fires for."""
        latest = due
        for _ in range(1024):  # bounded: a long outage of a per-second schedule is a jump, not a walk
            following = self.after(latest)
            if following > now:
                return latest
            latest = following
        start = dt.datetime.fromtimestamp(now, self.zone)
        previous: dt.datetime = croniter(self.expression, start, second_at_beginning=self._seconds).get_prev(dt.datetime)
        return max(due, previous.timestamp())
