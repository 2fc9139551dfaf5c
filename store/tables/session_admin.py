"""Queries behind session management: rename, delete with children, prune, lookup."""

from __future__ import annotations

from typing import Any

from ..conn import Conn, dialect

__all__ = ["rename", "subtree", "busy", "delete", "empty_before", "by_prefix", "last_active"]

_SUMMARY = ("session_id, title, source, created_at, updated_at, message_count, "
            "parent_session_id, cwd, usage_json")


def rename(conn: Conn, session_id: str, title: str) -> bool:
    cur = conn.execute("UPDATE sessions SET title = ? WHERE session_id = ?", (title, session_id))
    return cur.rowcount == 1


def subtree(conn: Conn, session_id: str) -> list[str]:
    """The session and its delegation descendants, parents before children."""
    rows = conn.execute(
        "WITH RECURSIVE t(id, depth) AS (SELECT ?, 0 UNION ALL "
        "SELECT s.session_id, t.depth + 1 FROM sessions s JOIN t ON s.parent_session_id = t.id "
        "WHERE t.depth < 64) SELECT id FROM t ORDER BY depth", (session_id,))
    return [r[0] for r in rows]


def _marks(ids: list[str]) -> str:
    return ", ".join("?" * len(ids))


def busy(conn: Conn, ids: list[str]) -> tuple[int, int, int]:
    """(open admissions, background delegations not yet delivered, background
    processes running or with a notice not yet delivered) among ``ids``."""
    (open_,) = conn.execute(
        f"SELECT count(*) FROM session_admissions WHERE status != 'terminal' "
        f"AND target_session_id IN ({_marks(ids)})", ids).fetchone()
    (undelivered,) = conn.execute(
        f"SELECT count(*) FROM async_delegations WHERE (state = 'running' OR "
        f"delivery_state = 'pending') AND origin_session_id IN ({_marks(ids)})", ids).fetchone()
    (processes,) = conn.execute(
        f"SELECT count(*) FROM processes WHERE (state = 'running' OR "
        f"delivery_state = 'pending') AND session_id IN ({_marks(ids)})", ids).fetchone()
    return int(open_), int(undelivered), int(processes)


#: every table with rows of a session, children before the sessions row itself
#: (a foreign key to sessions is checked when its statement ends). cron_runs keep
#: their history: a run names the session it made, which may be gone.
_CHILD_TABLES = (("events", "session_id"), ("messages", "session_id"),
                 ("approvals", "session_id"), ("approval_rules", "session_id"),
                 ("processes", "session_id"), ("session_admissions", "target_session_id"),
                 ("async_delegations", "origin_session_id"),
                 ("api_conversations", "session_id"), ("compactions", "session_id"))
#: PostgreSQL only (the fleet): leases go with their session (ON DELETE CASCADE)
_PG_CHILD_TABLES = (("turn_stops", "session_id"),)


def delete(conn: Conn, ids: list[str]) -> None:
    """Every row of these sessions; one statement per table, so foreign keys between
    them (children's parent) are checked once all are gone."""
    marks = _marks(ids)
    tables = _CHILD_TABLES + (_PG_CHILD_TABLES if dialect(conn) == "postgresql" else ())
    for table, column in tables:
        conn.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", ids)
    conn.execute(f"DELETE FROM sessions WHERE session_id IN ({marks})", ids)


def empty_before(conn: Conn, cutoff: float) -> list[str]:
    """Sessions created before ``cutoff`` with nothing in them: no message, no
    admission, no child, no delegation."""
    rows = conn.execute(
        "SELECT session_id FROM sessions s WHERE created_at < ? AND message_count = 0 "
        "AND NOT EXISTS (SELECT 1 FROM session_admissions a "
        "                WHERE a.target_session_id = s.session_id) "
        "AND NOT EXISTS (SELECT 1 FROM sessions c WHERE c.parent_session_id = s.session_id) "
        "AND NOT EXISTS (SELECT 1 FROM async_delegations d "
        "                WHERE d.origin_session_id = s.session_id) "
        "AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.session_id) "
        "ORDER BY created_at", (cutoff,))
    return [r[0] for r in rows]


def by_prefix(conn: Conn, prefix: str, limit: int) -> list[dict[str, Any]]:
    """Sessions whose id starts with ``prefix`` (exact match first)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = conn.execute(
        f"SELECT {_SUMMARY} FROM sessions WHERE session_id LIKE ? ESCAPE '\\' "
        "ORDER BY session_id != ?, created_at DESC LIMIT ?", (escaped + "%", prefix, limit))
    return [dict(r) for r in rows]


def last_active(conn: Conn, skip_sources: tuple[str, ...]) -> list[dict[str, Any]]:
    """The top-level session with the latest activity that has any messages and
    whose source is none of ``skip_sources``."""
    marks = ", ".join("?" * len(skip_sources)) or "NULL"
    rows = conn.execute(
        f"SELECT {_SUMMARY} FROM sessions WHERE parent_session_id IS NULL "
        f"AND message_count > 0 AND (source IS NULL OR source NOT IN ({marks})) "
        "ORDER BY updated_at DESC, session_id DESC LIMIT 1", skip_sources)
    return [dict(r) for r in rows]
