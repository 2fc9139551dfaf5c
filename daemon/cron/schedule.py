"""Schedules: parsing a job's schedule text and finding its times. Pure (no I/O, no clock).

Forms (docs/cron.md):

- a 5-field cron expression (``30 7 * * 1-5``), evaluated in the job's IANA time
  zone by cronsim; the aliases ``@yearly``/``@annually``, ``@monthly``,
  ``@weekly``, ``@daily``/``@midnight`` and ``@hourly`` stand for their usual
  expressions;
- an interval, ``every N`` with a unit ``s``, ``m``, ``h`` or ``d`` (``every 30s``,
  ``every 5m``): times ``anchor + k·N``, where the anchor is when the schedule
  was set (whole seconds);
- a one-shot, ``at ISO-TIME`` (a time without an offset is read in the job's
  zone) or ``in N<unit>`` (from when the schedule was set).

DST, for cron expressions (cronsim follows Debian cron): a wall-clock time that
does not exist on a spring-forward day fires at the first moment after the gap;
on a fall-back day a fixed time fires once (at its first occurrence) while
wildcard-hour expressions fire in both repeated hours. Intervals are absolute
durations and ignore DST.

Times are unix seconds (floats) everywhere outside this module.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "ScheduleError", "Schedule", "parse", "zone", "default_grace", "iso", "MIN_GRACE",
    "MAX_GRACE", "ONE_SHOT_GRACE", "MAX_COUNTED",
]

ALIASES = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^(\d{1,9})\s*([smhd])$")
#: default grace: half the interval, clamped to this range (a one-shot gets ONE_SHOT_GRACE)
MIN_GRACE = 120.0
MAX_GRACE = 7200.0
ONE_SHOT_GRACE = 120.0
#: missed times counted at most (a minutely job down for a year is "at least" this many)
MAX_COUNTED = 10_000


class ScheduleError(ValueError):
    """The schedule (or time zone) text is not one this module accepts; says why."""


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; ScheduleError if there is none."""
    try:
        if not name or name != name.strip() or ".." in name or name.startswith("/"):
            raise ValueError
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(f"{name!r} is not an IANA time zone (e.g. Europe/Berlin, UTC)") \
            from None


def duration(text: str) -> float:
    """``30s``, ``5m``, ``2h``, ``1d`` → seconds; ScheduleError otherwise."""
    m = _DURATION.match(text.strip())
    if m is None:
        raise ScheduleError(f"{text!r} is not a duration like 30s, 5m, 2h or 1d")
    return float(int(m.group(1)) * UNITS[m.group(2)])


def iso(t: float, tz: ZoneInfo | None = None) -> str:
    """``t`` as ISO 8601 (UTC with Z unless ``tz``), milliseconds only when present."""
    dt = datetime.fromtimestamp(t, tz or UTC)
    spec = "milliseconds" if round(t * 1000) % 1000 else "seconds"
    text = dt.isoformat(timespec=spec)
    return text.replace("+00:00", "Z") if tz is None else text


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule. ``kind`` is ``cron``, ``interval`` or ``once``."""

    text: str
    kind: str
    tz: ZoneInfo
    anchor: float  # interval: the first time minus one interval; once: the time
    expr: str = ""  # cron: the 5-field expression
    every: float = 0.0  # interval: seconds

    def next_after(self, t: float) -> float | None:
        """The first scheduled time strictly after ``t``; None if there is none."""
        if self.kind == "once":
            return self.anchor if self.anchor > t else None
        if self.kind == "interval":
            k = math.floor((t - self.anchor) / self.every) + 1
            return self.anchor + max(k, 1) * self.every
        from cronsim import CronSim  # a few ms to import: only when a cron job runs

        start = datetime.fromtimestamp(t, self.tz)
        return next(iter(CronSim(self.expr, start))).timestamp()

    def due(self, first: float, now: float) -> tuple[int, float]:
        """The times from ``first`` (a scheduled time) up to ``now``: how many (at most
        MAX_COUNTED) and the latest. ``first`` must be <= ``now``."""
        if self.kind == "once":
            return 1, first
        if self.kind == "interval":
            n = math.floor((now - first) / self.every) + 1
            return min(n, MAX_COUNTED), first + (n - 1) * self.every
        count, latest = 1, first
        while count < MAX_COUNTED:
            t = self.next_after(latest)
            if t is None or t > now:
                break
            count, latest = count + 1, t
        if count == MAX_COUNTED:  # too many to walk: the latest is found from now
            prev = self._latest_at_or_before(now, latest)
            latest = prev if prev is not None else latest
        return count, latest

    def _latest_at_or_before(self, now: float, floor: float) -> float | None:
        # walk forward from a day (then a year) before now: cheap, and cron has no
        # "previous" in cronsim
        for back in (86400.0, 366 * 86400.0):
            t = max(floor, now - back)
            found = None
            while (nxt := self.next_after(t)) is not None and nxt <= now:
                found, t = nxt, nxt
            if found is not None:
                return found
        return None

    def period(self, after: float) -> float | None:
        """The gap between the next two times after ``after`` (None for a one-shot)."""
        if self.kind == "once":
            return None
        if self.kind == "interval":
            return self.every
        a = self.next_after(after)
        b = self.next_after(a) if a is not None else None
        return (b - a) if a is not None and b is not None else None


def default_grace(schedule: Schedule, now: float) -> float:
    """Half the schedule's period, clamped to 2 min–2 h; 2 min for a one-shot."""
    period = schedule.period(now)
    if period is None:
        return ONE_SHOT_GRACE
    return min(max(period / 2, MIN_GRACE), MAX_GRACE)


def parse(text: str, tz_name: str, anchor: float) -> Schedule:
    """Parse ``text`` in zone ``tz_name``. ``anchor`` is when the schedule was set
    (unix seconds): intervals count from it and ``in N`` adds to it.

    Raises ScheduleError naming what is wrong (the time zone's errors say so)."""
    tz = zone(tz_name)
    s = " ".join(text.split())
    if not s:
        raise ScheduleError("the schedule is empty")
    low = s.lower()
    if low.startswith("every "):
        every = duration(low[6:])
        if every < 1:
            raise ScheduleError("an interval must be at least 1s")
        # whole seconds: `every 1s` fires on the second
        return Schedule(s, "interval", tz, float(math.floor(anchor)), every=every)
    if low.startswith("in "):
        return Schedule(s, "once", tz, float(math.ceil(anchor + duration(low[3:]))))
    if low.startswith("at "):
        return Schedule(s, "once", tz, _at(s[3:].strip(), tz))
    expr = ALIASES.get(low, s)
    if low.startswith("@") and low not in ALIASES:
        raise ScheduleError(f"unknown alias {s!r}; known: {', '.join(ALIASES)}")
    if len(expr.split()) != 5:
        raise ScheduleError(f"{s!r} is not a schedule: use a 5-field cron expression "
                            "(e.g. '0 9 * * 1-5'), @daily/@hourly/…, 'every 30m', "
                            "'at 2026-12-01T09:00' or 'in 20m'")
    from cronsim import CronSim, CronSimError

    try:
        it = iter(CronSim(expr, datetime.fromtimestamp(anchor, tz)))
        next(it)
    except (CronSimError, StopIteration, ValueError) as exc:
        raise ScheduleError(f"{s!r} is not a valid cron expression: {exc or 'it never fires'}") \
            from None
    return Schedule(s, "cron", tz, anchor, expr=expr)


def _at(text: str, tz: ZoneInfo) -> float:
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise ScheduleError(f"{text!r} is not an ISO 8601 time (e.g. 2026-12-01T09:00 or "
                            "2026-12-01T09:00:00+01:00)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=tz)
    return dt.timestamp()

