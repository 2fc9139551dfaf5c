"""Queries for `processes`: background processes the terminal tool started."""

from __future__ import annotations

from typing import Any

from ..conn import Conn

__all__ = ["insert", "set_pid", "get", "finish", "mark_delivered", "running_before",
           "undelivered", "for_session"]

_SELECT = ("SELECT process_id, session_id, admission_id, command, cwd, pid, pid_started, state, "
           "exit_code, output_tail, notify, delivery_state, owner_epoch, created_at, "
           "finished_at, delivered_at FROM processes")


def insert(conn: Conn, *, process_id: str, session_id: str,
           admission_id: str | None, command: str, cwd: str | None, notify: bool,
           owner_epoch: int, now: float) -> None:
    conn.execute(
        "INSERT INTO processes(process_id, session_id, admission_id, command, cwd, state, "
        "notify, delivery_state, owner_epoch, created_at) "
        "VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?, ?)",
        (process_id, session_id, admission_id, command, cwd, int(notify),
         "pending" if notify else "none", owner_epoch, now))


def set_pid(conn: Conn, process_id: str, pid: int, pid_started: str | None) -> None:
    conn.execute("UPDATE processes SET pid = ?, pid_started = ? WHERE process_id = ?",
                 (pid, pid_started, process_id))


def get(conn: Conn, process_id: str) -> dict[str, Any] | None:
    row = conn.execute(_SELECT + " WHERE process_id = ?", (process_id,)).fetchone()
    return dict(row) if row else None


def finish(conn: Conn, process_id: str, state: str, exit_code: int | None,
           output_tail: str, now: float) -> bool:
    """running → exited|killed|lost; False if it was no longer running."""
    cur = conn.execute(
        "UPDATE processes SET state = ?, exit_code = ?, output_tail = ?, finished_at = ? "
        "WHERE process_id = ? AND state = 'running'",
        (state, exit_code, output_tail, now, process_id))
    return cur.rowcount == 1


def mark_delivered(conn: Conn, process_id: str, now: float) -> bool:
    """pending → delivered for a finished row; False if already delivered (or none due)."""
    cur = conn.execute(
        "UPDATE processes SET delivery_state = 'delivered', delivered_at = ? "
        "WHERE process_id = ? AND delivery_state = 'pending' AND state != 'running'",
        (now, process_id))
    return cur.rowcount == 1


def running_before(conn: Conn, epoch: int, only: int | None = None) -> list[dict[str, Any]]:
    """Rows an older owner (epoch < ``epoch``) left running; with ``only``, those
    one dead node of a fleet (that epoch) left."""
    rows = conn.execute(_SELECT + f" WHERE state = 'running' AND owner_epoch "
                        f"{'=' if only else '<'} ? ORDER BY created_at", (only or epoch,))
    return [dict(r) for r in rows]


def undelivered(conn: Conn) -> list[dict[str, Any]]:
    """Finished rows whose notice is due and not yet delivered, oldest first."""
    rows = conn.execute(_SELECT + " WHERE delivery_state = 'pending' AND state != 'running' "
                        "ORDER BY created_at")
    return [dict(r) for r in rows]


def for_session(conn: Conn, session_id: str, limit: int = 100) -> list[dict[str, Any]]:
    rows = conn.execute(_SELECT + " WHERE session_id = ? ORDER BY created_at DESC LIMIT ?",
                        (session_id, limit))
    return [dict(r) for r in rows]
