"""Queries for `async_delegations`: background delegations and their delivery."""

from __future__ import annotations

from typing import Any

from ..conn import Conn

__all__ = ["insert", "get", "finish", "mark_delivered", "undelivered", "record_progress",
           "running_before"]

_SELECT = (
    "SELECT delegation_id, origin_session_id, origin_admission_id, state, task_json, "
    "result_json, delivery_state, owner_epoch, created_at, finished_at, delivered_at "
    "FROM async_delegations"
)


def insert(conn: Conn, *, delegation_id: str, origin_session_id: str,
           origin_admission_id: str, task_json: str, owner_epoch: int, now: float) -> None:
    conn.execute(
        "INSERT INTO async_delegations(delegation_id, origin_session_id, origin_admission_id, "
        "state, task_json, owner_epoch, created_at) VALUES (?, ?, ?, 'running', ?, ?, ?)",
        (delegation_id, origin_session_id, origin_admission_id, task_json, owner_epoch, now),
    )


def get(conn: Conn, delegation_id: str) -> dict[str, Any] | None:
    row = conn.execute(_SELECT + " WHERE delegation_id = ?", (delegation_id,)).fetchone()
    return dict(row) if row else None


def finish(conn: Conn, delegation_id: str, state: str, result_json: str,
           now: float) -> bool:
    """running → completed|failed|interrupted, with the result; False if not running."""
    cur = conn.execute(
        "UPDATE async_delegations SET state = ?, result_json = ?, finished_at = ? "
        "WHERE delegation_id = ? AND state = 'running'",
        (state, result_json, now, delegation_id),
    )
    return cur.rowcount == 1


def record_progress(conn: Conn, delegation_id: str, result_json: str) -> bool:
    """Save the results of the children finished so far on a running row."""
    cur = conn.execute(
        "UPDATE async_delegations SET result_json = ? "
        "WHERE delegation_id = ? AND state = 'running'",
        (result_json, delegation_id),
    )
    return cur.rowcount == 1


def running_before(conn: Conn, epoch: int, only: int | None = None) -> list[dict[str, Any]]:
    """Rows still running that an older owner (epoch < ``epoch``) started; with
    ``only``, those one dead node of a fleet (that epoch) started."""
    rows = conn.execute(
        _SELECT + f" WHERE state = 'running' AND owner_epoch {'=' if only else '<'} ? "
        "ORDER BY created_at", (only or epoch,)
    )
    return [dict(r) for r in rows]


def mark_delivered(conn: Conn, delegation_id: str, now: float) -> bool:
    """pending → delivered, only for a finished row; False if already delivered."""
    cur = conn.execute(
        "UPDATE async_delegations SET delivery_state = 'delivered', delivered_at = ? "
        "WHERE delegation_id = ? AND delivery_state = 'pending' AND state != 'running'",
        (now, delegation_id),
    )
    return cur.rowcount == 1


def undelivered(conn: Conn) -> list[dict[str, Any]]:
    """Finished rows whose result has not yet been delivered, oldest first."""
    rows = conn.execute(
        _SELECT + " WHERE delivery_state = 'pending' AND state != 'running' ORDER BY created_at"
    )
    return [dict(r) for r in rows]
