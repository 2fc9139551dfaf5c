"""Queries behind fork and export: a session's history up to a seq, read or copied.

A fork point is a turn's end: ``turn_end`` finds the last ``message.complete``
at or before a seq and the transcript position just past that turn's
messages. ``fork`` copies the session row's settings, the messages before that
position, the compactions that lie wholly inside it and the events up to that
seq into a new session, in the caller's transaction; the original is only read.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..conn import Conn

__all__ = ["turn_end", "fork", "events_for_export", "DELTA_TYPES"]

#: streamed pieces of an answer: an export has the whole answer instead
DELTA_TYPES = ("message.delta", "reasoning.delta")


def turn_end(conn: Conn, session_id: str, at_seq: int) -> tuple[int, int]:
    """(seq, transcript position) of the last turn that ended at or before ``at_seq``:
    its ``message.complete`` seq, and one past the last message of any turn that
    ended by then ((0, 0) when none had)."""
    row = conn.execute(
        "SELECT MAX(seq) FROM events WHERE session_id = ? AND type = 'message.complete' "
        "AND seq <= ?", (session_id, at_seq)).fetchone()
    seq = int(row[0] or 0)
    if seq == 0:
        return 0, 0
    row = conn.execute(
        "SELECT MAX(m.idx) FROM messages m WHERE m.session_id = ? AND m.admission_id IN ("
        " SELECT e.admission_id FROM events e WHERE e.session_id = ? "
        " AND e.type = 'message.complete' AND e.seq <= ?)",
        (session_id, session_id, seq)).fetchone()
    return seq, (int(row[0]) + 1 if row[0] is not None else 0)


def fork(conn: Conn, source: str, new_id: str, at_seq: int, end_index: int,
         now: float) -> tuple[int, int]:
    """Copy ``source`` into ``new_id`` up to ``at_seq`` / ``end_index``; returns
    (messages, compactions) copied. The new row keeps the settings and cwd, has
    no request_id, starts its own usage sums and names where it came from."""
    conn.execute(
        "INSERT INTO sessions(session_id, request_id, params_digest, parent_session_id, "
        "source, title, cwd, options_json, created_at, updated_at, message_count, "
        "forked_from, forked_at_seq) "
        "SELECT ?, NULL, NULL, NULL, 'fork', "
        "CASE WHEN title IS NULL THEN NULL ELSE SUBSTR('fork of ' || title, 1, 200) END, "
        "cwd, options_json, ?, ?, ?, session_id, ? FROM sessions WHERE session_id = ?",
        (new_id, now, now, end_index, at_seq, source))
    conn.execute(
        "INSERT INTO messages(session_id, idx, role, content, tool_calls_json, tool_call_id, "
        "name, admission_id, created_at) SELECT ?, idx, role, content, tool_calls_json, "
        "tool_call_id, name, admission_id, created_at FROM messages "
        "WHERE session_id = ? AND idx < ?", (new_id, source, end_index))
    rows = conn.execute(
        "SELECT compaction_id FROM compactions WHERE session_id = ? AND end_index <= ?",
        (source, end_index)).fetchall()
    for (cid,) in rows:
        conn.execute(
            "INSERT INTO compactions(compaction_id, session_id, first_index, end_index, "
            "summary, model, tokens_before, tokens_after, kind, focus, usage_json, created_at) "
            "SELECT ?, ?, first_index, end_index, summary, model, tokens_before, tokens_after, "
            "kind, focus, usage_json, created_at FROM compactions WHERE compaction_id = ?",
            (f"{cid}.{new_id[-8:]}", new_id, cid))
    conn.execute(
        "INSERT INTO events(session_id, seq, type, admission_id, payload_json, created_at) "
        "SELECT ?, seq, type, admission_id, payload_json, created_at FROM events "
        "WHERE session_id = ? AND seq <= ?", (new_id, source, at_seq))
    return end_index, len(rows)


def events_for_export(conn: Conn, session_id: str) -> list[dict[str, Any]]:
    """Every event but the streamed deltas, in order, payloads decoded."""
    rows = conn.execute(
        "SELECT seq, type, admission_id, payload_json, created_at FROM events "
        f"WHERE session_id = ? AND type NOT IN ({', '.join('?' * len(DELTA_TYPES))}) "
        "ORDER BY seq", (session_id, *DELTA_TYPES))
    out = []
    for r in rows:
        e = dict(r)
        e["payload"] = orjson.loads(e.pop("payload_json"))
        out.append(e)
    return out
