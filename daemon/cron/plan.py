"""What a due job does now: fire, skip, or wait. Pure: the service supplies the clock.

A job is due when ``now >= next_run_at``. Every scheduled time from
``next_run_at`` up to ``now`` is due; never more than one of them fires
(never a burst):

- the latest fires when it came due while this owner was running (``scheduled``),
  or when it passed while no owner ran but is still within the job's grace
  (``late``), or, past the grace, when the job's missed policy is ``catch_up``
  (``catch_up``); with policy ``skip`` nothing fires;
- the due times that did not fire are recorded in one ``skipped(missed)`` row at
  the first of them, with their count;
- if the job's previous run is still queued or running, the time that would fire
  is recorded ``skipped(still_running)`` instead, unless the job's overlap policy
  is ``queue``: then the job waits (nothing is written) and fires once that run
  has ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .schedule import Schedule

__all__ = ["Plan", "Skip", "plan_due", "plan_resume"]


@dataclass(frozen=True)
class Skip:
    scheduled_for: float
    reason: str  # still_running | missed | paused
    count: int = 1


@dataclass(frozen=True)
class Plan:
    """``fire``: (kind, scheduled_for) of the run to admit, or None. ``skips``: rows
    to record. ``next_run_at``: where the job goes next (None: no more times).
    ``wait``: nothing to do until the job's live run ends (overlap ``queue``)."""

    fire: tuple[str, float] | None = None
    skips: list[Skip] = field(default_factory=list)
    next_run_at: float | None = None
    wait: bool = False


def plan_due(schedule: Schedule, *, first: float, now: float, owner_started: float,
             grace: float, missed_policy: str, overlap: str, live: bool) -> Plan:
    """The plan for a job whose ``next_run_at`` (``first``) is <= ``now``."""
    count, latest = schedule.due(first, now)
    if latest >= owner_started:
        kind: str | None = "scheduled"
    elif now - latest <= grace:
        kind = "late"
    elif missed_policy == "catch_up":
        kind = "catch_up"
    else:
        kind = None
    skips: list[Skip] = []
    fire = (kind, latest) if kind is not None else None
    if fire is not None and live:
        if overlap == "queue":
            return Plan(wait=True, next_run_at=first)
        skips.append(Skip(latest, "still_running"))
        fire = None
        count -= 1  # the latest is recorded as still_running, not as missed
    missed = count - (1 if fire is not None else 0)
    if missed > 0:
        skips.append(Skip(first, "missed", missed))
    return Plan(fire=fire, skips=skips, next_run_at=schedule.next_after(max(latest, now)))


def plan_resume(schedule: Schedule, *, first: float | None, now: float) -> Plan:
    """A paused job resumes: times that passed while it was paused are one
    ``skipped(paused)`` row; it goes on from its next time after now."""
    skips = []
    if first is not None and first <= now:
        count, _ = schedule.due(first, now)
        skips.append(Skip(first, "paused", count))
    nxt = schedule.next_after(now) if first is None or first <= now else first
    return Plan(skips=skips, next_run_at=nxt)
