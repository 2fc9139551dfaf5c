"""Params and results of the cron.* methods (scheduled jobs; docs/cron.md).

Jobs are named by ``name`` (unique, ``[A-Za-z0-9][A-Za-z0-9._-]*``, at most 64
characters). The schedule text, the time zone and the delivery target are
checked by the owner, which answers ``invalid_params`` naming the field
(``schedule``, ``tz``, ``deliver``, ``grace_seconds``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from ..protocol import MAX_TEXT_CHARS
from .core import Model, Outcome, Status, Timestamp, TurnOptions, TurnResult

__all__ = [
    "CronCreateParams", "CronUpdateParams", "CronNameParams", "CronListParams",
    "CronRunsParams", "CronJob", "CronRun", "CronListResult", "CronRunsResult",
    "CronRemoveResult", "JobName",
]

JobName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
ScheduleText = Annotated[str, StringConstraints(min_length=1, max_length=200)]
ZoneName = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Deliver = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
#: at most a week: a run more than a week late is missed, whatever the job says
Grace = Annotated[float, Field(ge=0, le=7 * 86400)]
Overlap = Literal["skip", "queue"]
Missed = Literal["catch_up", "skip"]


class CronCreateParams(TurnOptions):
    """A new job. ``tz`` defaults to the owner's zone (``cron.timezone``, else its
    local zone); ``grace_seconds`` to half the schedule's period, clamped to
    120–7200 s; ``deliver`` is ``file:/absolute/path`` or ``session:ID``. The
    per-turn options apply to every run."""

    name: JobName
    schedule: ScheduleText
    prompt: Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT_CHARS)]
    tz: ZoneName | None = None
    cwd: Annotated[str, Field(max_length=4096)] | None = None
    deliver: Deliver | None = None
    overlap: Overlap = "skip"
    missed: Missed = "catch_up"
    grace_seconds: Grace | int | None = None
    paused: bool = False


class CronUpdateParams(TurnOptions):
    """Change the keys that are sent (``deliver: null`` and ``grace_seconds: null``
    clear them; a turn option sent as null returns to the default). A new schedule
    or zone is counted from now."""

    name: JobName
    schedule: ScheduleText | None = None
    prompt: Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT_CHARS)] | None \
        = None
    tz: ZoneName | None = None
    cwd: Annotated[str, Field(max_length=4096)] | None = None
    deliver: Deliver | None = None
    overlap: Overlap | None = None
    missed: Missed | None = None
    grace_seconds: Grace | int | None = None


class CronNameParams(Model):
    name: JobName


class CronListParams(Model):
    pass


class CronRunsParams(Model):
    name: JobName
    limit: Annotated[int, Field(ge=1, le=500)] = 20
    #: pass the last run's scheduled_for back for the next (older) page
    before: Timestamp | int | None = None


class CronRun(Model):
    """One scheduled time of a job. ``status`` admitted: its admission
    (``session_id``, ``admission_id``; ``admission_status``/``outcome`` are the
    ledger's, ``result`` its answer once terminal); skipped: ``skip_reason``
    (still_running | missed | paused) and, for missed/paused, ``missed_count``
    times that did not fire. ``delivery_status`` (pending | delivered | failed)
    only when the job delivers its answers."""

    run_id: str
    job: str
    scheduled_for: Timestamp
    fired_at: Timestamp
    kind: Literal["scheduled", "late", "catch_up", "manual"]
    status: Literal["skipped", "admitted"]
    skip_reason: Literal["still_running", "missed", "paused"] | None = None
    missed_count: int = 0
    session_id: str | None = None
    admission_id: str | None = None
    input_id: str | None = None
    admission_status: Status | None = None
    outcome: Outcome | None = None
    result: TurnResult | None = None
    delivery_status: Literal["pending", "delivered", "failed"] | None = None
    delivery_error: str | None = None


class CronJob(Model):
    job_id: str
    name: str
    schedule: str
    tz: str
    prompt: str
    options: TurnOptions
    cwd: str | None
    paused: bool
    overlap: Overlap
    missed: Missed
    grace_seconds: float  # the one in force (the default when none was set)
    grace_default: bool
    deliver: str | None
    next_run_at: Timestamp | None  # null: paused, or a one-shot that has fired
    created_at: Timestamp
    updated_at: Timestamp
    last_run: CronRun | None = None


class CronListResult(Model):
    jobs: list[CronJob]


class CronRunsResult(Model):
    runs: list[CronRun]
    next_before: Timestamp | None  # null on the last page


class CronRemoveResult(Model):
    removed: bool
