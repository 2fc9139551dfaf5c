"""Queries for `cron_jobs` (scheduled jobs) and `cron_runs` (one row per job and scheduled time).

A run's outcome is its admission's: `runs_page` and `live_run` join
`session_admissions` rather than keep a copy that could drift.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..conn import Conn

__all__ = [
    "JOB_COLUMNS", "insert_job", "get_job", "job_by_name", "list_jobs", "count_jobs",
    "update_job", "delete_job", "set_next_run", "enabled_jobs",
    "insert_run", "get_run", "runs_page", "live_run", "pending_deliveries", "set_delivery",
    "runs_for_job", "trim_runs",
]

JOB_COLUMNS = (
    "job_id", "name", "schedule", "tz", "anchor_at", "prompt", "options_json", "cwd", "enabled",
    "paused_at", "overlap", "missed", "grace_seconds", "deliver", "next_run_at", "created_at",
    "updated_at",
)
_JOB_SELECT = "SELECT " + ", ".join(JOB_COLUMNS) + " FROM cron_jobs"

RUN_COLUMNS = (
    "run_id", "job_id", "scheduled_for", "fired_at", "kind", "status", "skip_reason",
    "missed_count", "session_id", "admission_id", "delivery_status", "delivery_error",
    "delivered_at",
)
# a run with where its admission stands (null for skipped runs)
_RUN_SELECT = (
    "SELECT " + ", ".join(f"r.{c}" for c in RUN_COLUMNS)
    + ", a.status AS admission_status, a.outcome AS outcome, a.result_json AS result_json"
    " FROM cron_runs r LEFT JOIN session_admissions a ON a.admission_id = r.admission_id"
)


def _job(row: Any) -> dict[str, Any] | None:
    if row is None:
        return None
    out = dict(row)
    out["options"] = orjson.loads(out.pop("options_json"))
    out["enabled"] = bool(out["enabled"])
    return out


def insert_job(conn: Conn, job: dict[str, Any]) -> None:
    """Insert ``job`` (every JOB_COLUMN but options_json, plus ``options``).
    Raises sqlite3.IntegrityError if its name is taken."""
    values = dict(job)
    values["options_json"] = orjson.dumps(values.pop("options"),
                                          option=orjson.OPT_SORT_KEYS).decode()
    values["enabled"] = int(values["enabled"])
    conn.execute(
        f"INSERT INTO cron_jobs({', '.join(JOB_COLUMNS)}) "
        f"VALUES ({', '.join('?' * len(JOB_COLUMNS))})",
        tuple(values[c] for c in JOB_COLUMNS))


def get_job(conn: Conn, job_id: str) -> dict[str, Any] | None:
    return _job(conn.execute(_JOB_SELECT + " WHERE job_id = ?", (job_id,)).fetchone())


def job_by_name(conn: Conn, name: str) -> dict[str, Any] | None:
    return _job(conn.execute(_JOB_SELECT + " WHERE name = ?", (name,)).fetchone())


def list_jobs(conn: Conn) -> list[dict[str, Any]]:
    return [_job(r) for r in conn.execute(_JOB_SELECT + " ORDER BY name")]  # type: ignore[misc]


def enabled_jobs(conn: Conn) -> list[dict[str, Any]]:
    """Jobs that are not paused and still have a next run."""
    rows = conn.execute(_JOB_SELECT + " WHERE enabled = 1 AND next_run_at IS NOT NULL")
    return [_job(r) for r in rows]  # type: ignore[misc]


def count_jobs(conn: Conn) -> int:
    (n,) = conn.execute("SELECT COUNT(*) FROM cron_jobs").fetchone()
    return int(n)


def update_job(conn: Conn, job_id: str, changes: dict[str, Any]) -> None:
    """Set the given columns (``options`` is stored as options_json)."""
    values = dict(changes)
    if "options" in values:
        values["options_json"] = orjson.dumps(values.pop("options"),
                                              option=orjson.OPT_SORT_KEYS).decode()
    if "enabled" in values:
        values["enabled"] = int(values["enabled"])
    unknown = set(values) - set(JOB_COLUMNS)
    if unknown:
        raise ValueError(f"not cron_jobs columns: {sorted(unknown)}")
    cols = sorted(values)
    conn.execute(f"UPDATE cron_jobs SET {', '.join(f'{c} = ?' for c in cols)} WHERE job_id = ?",
                 (*(values[c] for c in cols), job_id))


def set_next_run(conn: Conn, job_id: str, next_run_at: float | None, *, expected: float,
                 updated_at: float) -> bool:
    """Advance ``next_run_at`` only if the job is still as it was read: enabled, its
    next time still ``expected`` and ``updated_at`` unchanged (a pause, an edit or a
    removal that committed meanwhile wins); True if it was advanced."""
    cur = conn.execute("UPDATE cron_jobs SET next_run_at = ? WHERE job_id = ? AND enabled = 1 "
                       "AND next_run_at = ? AND updated_at = ?",
                       (next_run_at, job_id, expected, updated_at))
    return cur.rowcount == 1


def delete_job(conn: Conn, job_id: str) -> None:
    """The job and its run history (the runs' sessions and admissions stay)."""
    conn.execute("DELETE FROM cron_runs WHERE job_id = ?", (job_id,))
    conn.execute("DELETE FROM cron_jobs WHERE job_id = ?", (job_id,))


def insert_run(conn: Conn, *, run_id: str, job_id: str, scheduled_for: float,
               fired_at: float, kind: str, status: str, skip_reason: str | None = None,
               missed_count: int = 0, session_id: str | None = None,
               admission_id: str | None = None,
               delivery_status: str | None = None) -> bool:
    """Insert a run; False (nothing written) if the job already has a run for
    ``scheduled_for`` (the unique key that makes every scheduled time fire once)."""
    cur = conn.execute(
        "INSERT INTO cron_runs(run_id, job_id, scheduled_for, fired_at, kind, status, "
        "skip_reason, missed_count, session_id, admission_id, delivery_status) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(job_id, scheduled_for) DO NOTHING",
        (run_id, job_id, scheduled_for, fired_at, kind, status, skip_reason, missed_count,
         session_id, admission_id, delivery_status))
    return cur.rowcount == 1


def get_run(conn: Conn, run_id: str) -> dict[str, Any] | None:
    row = conn.execute(_RUN_SELECT + " WHERE r.run_id = ?", (run_id,)).fetchone()
    return dict(row) if row is not None else None


def runs_page(conn: Conn, job_id: str, limit: int,
              before: float | None) -> list[dict[str, Any]]:
    """Newest scheduled first; ``before`` is the scheduled_for of the last row seen."""
    if before is None:
        rows = conn.execute(_RUN_SELECT + " WHERE r.job_id = ? ORDER BY r.scheduled_for DESC "
                            "LIMIT ?", (job_id, limit))
    else:
        rows = conn.execute(_RUN_SELECT + " WHERE r.job_id = ? AND r.scheduled_for < ? "
                            "ORDER BY r.scheduled_for DESC LIMIT ?", (job_id, before, limit))
    return [dict(r) for r in rows]


def runs_for_job(conn: Conn, job_id: str) -> list[dict[str, Any]]:
    """Every run of a job, oldest first."""
    rows = conn.execute(_RUN_SELECT + " WHERE r.job_id = ? ORDER BY r.scheduled_for",
                        (job_id,))
    return [dict(r) for r in rows]


def live_run(conn: Conn, job_id: str) -> dict[str, Any] | None:
    """The job's newest admitted run whose admission is still queued or started."""
    row = conn.execute(
        _RUN_SELECT + " WHERE r.job_id = ? AND r.status = 'admitted' "
        "AND a.status IN ('queued', 'started') ORDER BY r.scheduled_for DESC LIMIT 1",
        (job_id,)).fetchone()
    return dict(row) if row is not None else None


def pending_deliveries(conn: Conn) -> list[dict[str, Any]]:
    """Runs whose answer still has to be delivered, oldest first."""
    rows = conn.execute(_RUN_SELECT + " WHERE r.delivery_status = 'pending' "
                        "ORDER BY r.scheduled_for")
    return [dict(r) for r in rows]


def set_delivery(conn: Conn, run_id: str, status: str, error: str | None,
                 now: float) -> bool:
    """pending → ``status`` (delivered or failed); False if it was not pending."""
    cur = conn.execute(
        "UPDATE cron_runs SET delivery_status = ?, delivery_error = ?, delivered_at = ? "
        "WHERE run_id = ? AND delivery_status = 'pending'", (status, error, now, run_id))
    return cur.rowcount == 1


def trim_runs(conn: Conn, job_id: str, keep: int) -> None:
    """Delete the job's oldest runs beyond the newest ``keep`` (never one whose
    delivery is still pending)."""
    conn.execute(
        "DELETE FROM cron_runs WHERE job_id = ? AND COALESCE(delivery_status, '') != 'pending' "
        "AND scheduled_for < (SELECT scheduled_for FROM cron_runs WHERE job_id = ? "
        "ORDER BY scheduled_for DESC LIMIT 1 OFFSET ?)", (job_id, job_id, keep - 1))
