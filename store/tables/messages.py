"""Queries for the `messages` table: each session's transcript, in order."""

from __future__ import annotations

from typing import Any

import orjson

from ..conn import Conn, dialect, send, serialise_session
from . import sessions

__all__ = ["append", "list_for", "count", "tail", "message_of", "MESSAGE_COLUMNS"]


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
        # waits for an answer (store/pg/db.py's pipeline)
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


def list_for(conn: Conn, session_id: str, start: int = 0, end: int | None = None, *,
             with_index: bool = False) -> list[dict[str, Any]]:
    """The transcript in order, from position ``start`` (a compaction's end_index: a
    turn reads only what its latest compaction does not stand for) up to ``end``
    (exclusive); ``with_index`` adds each message's position as ``index``."""
    sql = ("SELECT idx, role, content, tool_calls_json, tool_call_id, name, admission_id, "
           "created_at FROM messages WHERE session_id = ? AND idx >= ?")
    args: tuple[Any, ...] = (session_id, start)
    if end is not None:
        sql += " AND idx < ?"
        args += (end,)
    rows = conn.execute(sql + " ORDER BY idx", args)
    return [message_of(r, with_index) for r in rows]


#: the columns `message_of` reads
MESSAGE_COLUMNS = ("idx", "role", "content", "tool_calls_json", "tool_call_id", "name",
                   "admission_id", "created_at")


def message_of(row: Any, with_index: bool = False) -> dict[str, Any]:
    """A row of MESSAGE_COLUMNS as a message (``index``: its position, if asked)."""
    m = {k: row[k] for k in MESSAGE_COLUMNS}
    raw = m.pop("tool_calls_json")
    m["tool_calls"] = orjson.loads(raw) if raw else None
    index = m.pop("idx")
    if with_index:
        m["index"] = index
    return m


def count(conn: Conn, session_id: str) -> int:
    """How many messages the transcript has (the next message's position)."""
    (n,) = conn.execute("SELECT COALESCE(MAX(idx), -1) + 1 FROM messages WHERE session_id = ?",
                        (session_id,)).fetchone()
    return int(n)


def tail(conn: Conn, session_id: str, count: int) -> list[dict[str, Any]]:
    """The session's last ``count`` messages (role, tool_calls, tool_call_id), in order."""
    rows = conn.execute(
        "SELECT role, tool_calls_json, tool_call_id FROM messages WHERE session_id = ? "
        "ORDER BY idx DESC LIMIT ?", (session_id, count))
    out = [{"role": r[0], "tool_calls": orjson.loads(r[1]) if r[1] else None,
            "tool_call_id": r[2]} for r in rows]
    out.reverse()
    return out
