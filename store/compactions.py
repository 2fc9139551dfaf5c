"""Queries for the `compactions` table: summaries that stand for a span of a transcript.

A record says: messages [first_index, end_index) of the session's transcript are
summarised by ``summary``. Each record's summary folds in the previous one, so
``first_index`` of the latest is 0 and a turn needs only the latest record plus
the messages from its ``end_index`` on. Records are written in one unit once
the summary is whole (daemon/engine/compaction.py); the messages are never touched.
"""

from __future__ import annotations

from typing import Any

import orjson

from .conn import Conn
from .messages import MESSAGE_COLUMNS, message_of

__all__ = ["insert", "latest", "current", "list_for", "COLUMNS"]

COLUMNS = ("compaction_id", "session_id", "first_index", "end_index", "summary", "model",
           "tokens_before", "tokens_after", "kind", "focus", "usage_json", "created_at")
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM compactions"


def _row(row: Any) -> dict[str, Any]:
    out = dict(row)
    out["usage"] = orjson.loads(out.pop("usage_json") or "{}")
    return out


def insert(conn: Conn, record: dict[str, Any]) -> None:
    values = {**record, "usage_json": orjson.dumps(record.get("usage") or {}).decode()}
    conn.execute(f"INSERT INTO compactions({', '.join(COLUMNS)}) "
                 f"VALUES ({', '.join('?' * len(COLUMNS))})",
                 tuple(values.get(c) for c in COLUMNS))


def latest(conn: Conn, session_id: str) -> dict[str, Any] | None:
    """The record reaching furthest into the transcript (None: never compacted)."""
    row = conn.execute(f"{_SELECT} WHERE session_id = ? ORDER BY end_index DESC, created_at "
                       "DESC LIMIT 1", (session_id,)).fetchone()
    return None if row is None else _row(row)


_LATEST_END = ("SELECT end_index FROM compactions WHERE session_id = ? "
               "ORDER BY end_index DESC, created_at DESC LIMIT 1")


def current(conn: Conn, session_id: str) -> tuple[list[dict[str, Any]], str | None]:
    """What a turn reads of its transcript, in one statement (one snapshot): the
    messages from the latest compaction's ``end_index`` on, with ``index``, and that
    compaction's summary (None: never compacted). The summary comes as a first
    row of its own, the messages after it."""
    columns = ", ".join(f"m.{c}" for c in MESSAGE_COLUMNS[1:])
    nulls = ", ".join(f"NULL AS {c}" for c in MESSAGE_COLUMNS[1:])
    rows = conn.execute(
        f"SELECT 0 AS part, c.end_index AS idx, c.summary, {nulls} FROM ("
        f"SELECT end_index, summary FROM compactions WHERE session_id = ? "
        f"ORDER BY end_index DESC, created_at DESC LIMIT 1) c "
        f"UNION ALL SELECT 1 AS part, m.idx, NULL AS summary, {columns} FROM messages m "
        f"WHERE m.session_id = ? AND m.idx >= COALESCE(({_LATEST_END}), 0) "
        f"ORDER BY part, idx", (session_id, session_id, session_id)).fetchall()
    summary = rows[0]["summary"] if rows and rows[0]["part"] == 0 else None
    return [message_of(r, True) for r in rows if r["part"] == 1], summary


def list_for(conn: Conn, session_id: str) -> list[dict[str, Any]]:
    """Every record of the session, oldest first."""
    rows = conn.execute(f"{_SELECT} WHERE session_id = ? ORDER BY end_index, created_at",
                        (session_id,))
    return [_row(r) for r in rows]
