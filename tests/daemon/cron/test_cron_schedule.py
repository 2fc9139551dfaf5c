"""Schedules and the due-job plan (daemon/cron/schedule.py, plan.py): pure, with a given clock."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from tether.daemon.cron.plan import plan_due, plan_resume
from tether.daemon.cron.schedule import ScheduleError, default_grace, parse

BERLIN = ZoneInfo("Europe/Berlin")


def at(*args: int, tz: ZoneInfo = BERLIN) -> float:
    return datetime(*args, tzinfo=tz).timestamp()


def local(t: float, tz: ZoneInfo = BERLIN) -> str:
    return datetime.fromtimestamp(t, tz).isoformat()


def test_cron_expressions_and_aliases_run_in_the_job_zone():
    s = parse("30 7 * * 1-5", "Europe/Berlin", at(2026, 11, 27, 12))  # a Friday
    assert local(s.next_after(at(2026, 11, 27, 12))) == "2026-11-30T07:30:00+01:00"
    daily = parse("@daily", "America/New_York", 0)
    ny = ZoneInfo("America/New_York")
    nxt = daily.next_after(at(2026, 11, 27, 12, tz=ny))
    assert local(nxt, ny) == "2026-11-28T00:00:00-05:00"
    assert parse("@hourly", "UTC", 0).next_after(at(2026, 1, 1, 0, 10, tz=ZoneInfo("UTC"))) \
        == at(2026, 1, 1, 1, tz=ZoneInfo("UTC"))


def test_dst_spring_forward_fires_after_the_gap_and_fall_back_fires_once():
    s = parse("30 2 * * *", "Europe/Berlin", 0)
    # 2026-03-29 02:30 does not exist in Berlin: the run is at 03:00
    assert local(s.next_after(at(2026, 3, 28, 12))) == "2026-03-29T03:00:00+02:00"
    # 2026-10-25 02:30 happens twice: a fixed time fires at the first one only
    first = s.next_after(at(2026, 10, 24, 12))
    assert local(first) == "2026-10-25T02:30:00+02:00"
    assert local(s.next_after(first)) == "2026-10-26T02:30:00+01:00"


def test_intervals_count_from_the_anchor_in_whole_seconds():
    s = parse("every 30s", "UTC", 1000.7)
    assert s.next_after(1000.7) == 1030.0
    assert s.next_after(1030.0) == 1060.0
    assert s.due(1030.0, 1100.0) == (3, 1090.0)  # 1030, 1060, 1090
    assert parse("every 2h", "UTC", 0).every == 7200


def test_one_shots():
    s = parse("in 20m", "UTC", 1000.0)
    assert s.next_after(1000.0) == 2200.0 and s.next_after(2200.0) is None
    a = parse("at 2026-12-01T09:00", "Europe/Berlin", 0)
    assert local(a.next_after(0)) == "2026-12-01T09:00:00+01:00"
    z = parse("at 2026-12-01T09:00:00Z", "Europe/Berlin", 0)
    assert z.next_after(0) == at(2026, 12, 1, 9, tz=ZoneInfo("UTC"))


@pytest.mark.parametrize("text", ["", "every", "every 0s", "every 5 parsecs", "in soon",
                                  "at tomorrow", "@sometimes", "* * *", "61 * * * *",
                                  "0 9 * * mon-funday"])
def test_bad_schedules_say_why(text):
    with pytest.raises(ScheduleError) as err:
        parse(text, "UTC", 0)
    assert str(err.value)


@pytest.mark.parametrize("zone_name", ["Mars/Olympus", "../etc/passwd", "/etc/localtime", ""])
def test_bad_zones_are_refused(zone_name):
    with pytest.raises(ScheduleError, match="IANA"):
        parse("@daily", zone_name, 0)


def test_default_grace_is_half_the_period_clamped():
    assert default_grace(parse("every 1s", "UTC", 0), 0) == 120
    assert default_grace(parse("every 1h", "UTC", 0), 0) == 1800
    assert default_grace(parse("@daily", "UTC", 0), 0) == 7200
    assert default_grace(parse("in 5m", "UTC", 0), 0) == 120


EVERY = parse("every 10s", "UTC", 0)


def plan(first: float, now: float, *, started: float = 0, grace: float = 5, missed="catch_up",
         overlap="skip", live=False):
    return plan_due(EVERY, first=first, now=now, owner_started=started, grace=grace,
                    missed_policy=missed, overlap=overlap, live=live)


def test_an_on_time_fire():
    p = plan(100, 100.01)
    assert p.fire == ("scheduled", 100) and p.skips == [] and p.next_run_at == 110


def test_downtime_past_grace_is_one_catch_up_and_one_missed_row():
    p = plan(100, 136, started=134)  # 100, 110, 120, 130 passed while down
    assert p.fire == ("catch_up", 130)
    assert [(s.scheduled_for, s.reason, s.count) for s in p.skips] == [(100, "missed", 3)]
    assert p.next_run_at == 140


def test_downtime_within_grace_fires_late():
    p = plan(100, 132, started=131)
    assert p.fire == ("late", 130)
    assert [(s.reason, s.count) for s in p.skips] == [("missed", 3)]


def test_missed_skip_fires_nothing_past_grace():
    p = plan(100, 136, started=135, missed="skip")
    assert p.fire is None
    assert [(s.scheduled_for, s.reason, s.count) for s in p.skips] == [(100, "missed", 4)]
    # within the grace the latest still runs
    assert plan(100, 131, started=131, missed="skip").fire == ("late", 130)


def test_overlap_skip_records_still_running_and_queue_waits():
    p = plan(100, 100.5, live=True)
    assert p.fire is None and [(s.reason, s.count) for s in p.skips] == [("still_running", 1)]
    assert p.next_run_at == 110
    p = plan(100, 125, started=0, live=True)
    assert sorted((s.scheduled_for, s.reason) for s in p.skips) == [(100, "missed"),
                                                                     (120, "still_running")]
    q = plan(100, 100.5, overlap="queue", live=True)
    assert q.wait and q.fire is None and q.skips == []


def test_resume_records_the_paused_times_once():
    p = plan_resume(EVERY, first=100, now=145)
    assert [(s.scheduled_for, s.reason, s.count) for s in p.skips] == [(100, "paused", 5)]
    assert p.next_run_at == 150
    assert plan_resume(EVERY, first=200, now=145).skips == []
