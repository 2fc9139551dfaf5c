"""Queries for the `messages` table: each session's transcript, in order."""

from __future__ import annotations

from typing import Any

import orjson

from . import sessions
from .conn import Conn, dialect, send, serialise_session

__all__ = ["append", "list_for"]


def append(conn: Conn, session_id: str, messages: list[dict[str, Any]],
           now: float) -> None:
    """Append chat-format messages (role, content, tool_calls?, tool_call_id?, name?).

    Also bumps the session's message_count and updated_at.
    """
    if not messages:
        return
    serialise_session(conn, session_id)
    if dialect(conn) == "postgresql":
        # each row numbered in its own INSERT, under the session's lock: nothing
        # waits for an answer (store/pg.py's pipeline)
        for m in messages:
            send(conn,
                 "INSERT INTO messages(session_id, idx, role, content, tool_calls_json, "
                 "tool_call_id, name, admission_id, created_at) SELECT ?, "
                 "COALESCE(MAX(idx), -1) + 1, ?, ?, ?, ?, ?, ?, ? FROM messages "
                 "WHERE session_id = ?",
                 (session_id, m["role"], m.get("content"),
                  orjson.dumps(m["tool_calls"]).decode() if m.get("tool_calls") else None,
                  m.get("tool_call_id"), m.get("name"), m.get("admission_id"), now,
                  session_id))
        sessions.touch(conn, session_id, now, len(messages))
        return
    (start,) = conn.execute(
        "SELECT COALESCE(MAX(idx), -1) + 1 FROM messages WHERE session_id = ?", (session_id,)
    ).fetchone()
    conn.executemany(
        "INSERT INTO messages(session_id, idx, role, content, tool_calls_json, tool_call_id, "
        "name, admission_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                session_id, start + i, m["role"], m.get("content"),
                orjson.dumps(m["tool_calls"]).decode() if m.get("tool_calls") else None,
                m.get("tool_call_id"), m.get("name"), m.get("admission_id"), now,
            )
            for i, m in enumerate(messages)
        ],
    )
    sessions.touch(conn, session_id, now, len(messages))


def list_for(conn: Conn, session_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT role, content, tool_calls_json, tool_call_id, name, admission_id, created_at "
        "FROM messages WHERE session_id = ? ORDER BY idx",
        (session_id,),
    )
    out = []
    for r in rows:
        m = dict(r)
        raw = m.pop("tool_calls_json")
        m["tool_calls"] = orjson.loads(raw) if raw else None
        out.append(m)
    return out
