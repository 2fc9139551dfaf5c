"""Queries for `approvals` (one prompt per risky tool call) and `approval_rules`."""

from __future__ import annotations

from typing import Any

from ..conn import Conn

__all__ = ["insert", "get", "resolve", "pending", "cancel_pending", "rules_for", "all_rules",
           "add_rule", "remove_rule"]

_COLUMNS = ("approval_id, session_id, admission_id, call_id, tool, kind, subject, why, cwd, "
            "status, decision, cause, answered_by, reason, created_at, expires_at, resolved_at")
_SELECT = f"SELECT {_COLUMNS} FROM approvals"


def insert(conn: Conn, *, approval_id: str, session_id: str,
           admission_id: str | None, call_id: str, tool: str, kind: str, subject: str,
           why: str, cwd: str | None, owner_epoch: int, now: float, expires_at: float) -> None:
    conn.execute(
        "INSERT INTO approvals(approval_id, session_id, admission_id, call_id, tool, kind, "
        "subject, why, cwd, owner_epoch, created_at, expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (approval_id, session_id, admission_id, call_id, tool, kind, subject, why, cwd,
         owner_epoch, now, expires_at))


def get(conn: Conn, approval_id: str) -> dict[str, Any] | None:
    row = conn.execute(_SELECT + " WHERE approval_id = ?", (approval_id,)).fetchone()
    return dict(row) if row else None


def resolve(conn: Conn, approval_id: str, *, status: str, cause: str,
            decision: str | None, answered_by: str | None, reason: str | None,
            now: float) -> bool:
    """pending → ``status``; False (nothing changed) if it was no longer pending."""
    cur = conn.execute(
        "UPDATE approvals SET status = ?, cause = ?, decision = ?, answered_by = ?, "
        "reason = ?, resolved_at = ? WHERE approval_id = ? AND status = 'pending'",
        (status, cause, decision, answered_by, reason, now, approval_id))
    return cur.rowcount == 1


def pending(conn: Conn, session_id: str | None = None) -> list[dict[str, Any]]:
    """Pending prompts, oldest first (of one session, or of all)."""
    if session_id is None:
        rows = conn.execute(_SELECT + " WHERE status = 'pending' ORDER BY created_at")
    else:
        rows = conn.execute(_SELECT + " WHERE status = 'pending' AND session_id = ? "
                            "ORDER BY created_at", (session_id,))
    return [dict(r) for r in rows]


def cancel_pending(conn: Conn, cause: str, now: float,
                   only: int | None = None) -> list[dict[str, Any]]:
    """Every pending prompt (with ``only``: those of one dead node of a fleet, that
    epoch) → cancelled with ``cause``; the rows it cancelled."""
    rows = conn.execute(
        "UPDATE approvals SET status = 'cancelled', cause = ?, resolved_at = ? "
        "WHERE status = 'pending' " + ("AND owner_epoch = ? " if only else "")
        + "RETURNING approval_id, session_id, admission_id",
        (cause, now, *([only] if only else []))).fetchall()
    return [dict(r) for r in rows]


_RULE_COLUMNS = "rule_id, kind, pattern, session_id, approval_id, created_at"


def rules_for(conn: Conn, session_id: str) -> list[dict[str, Any]]:
    """Remembered answers that apply in ``session_id``: every session's, and its own."""
    rows = conn.execute(f"SELECT {_RULE_COLUMNS} FROM approval_rules "
                        "WHERE session_id IN ('', ?) ORDER BY created_at", (session_id,))
    return [dict(r) for r in rows]


def all_rules(conn: Conn) -> list[dict[str, Any]]:
    rows = conn.execute(f"SELECT {_RULE_COLUMNS} FROM approval_rules ORDER BY created_at")
    return [dict(r) for r in rows]


def add_rule(conn: Conn, *, rule_id: str, kind: str, pattern: str,
             session_id: str, approval_id: str | None, now: float) -> None:
    """Remember an answer (``session_id`` '' = every session); a duplicate is a no-op."""
    conn.execute(
        "INSERT INTO approval_rules(rule_id, kind, pattern, session_id, approval_id, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (kind, pattern, session_id) DO NOTHING",
        (rule_id, kind, pattern, session_id, approval_id, now))


def remove_rule(conn: Conn, rule_id: str) -> bool:
    return conn.execute("DELETE FROM approval_rules WHERE rule_id = ?", (rule_id,)).rowcount == 1
