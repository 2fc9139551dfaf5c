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

from ..conn import Conn
from .messages import MESSAGE_COLUMNS, message_of

__all__ = ["insert", "latest", "current", "since", "list_for", "COLUMNS"]

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


_LATEST = ("SELECT {} FROM compactions WHERE session_id = ? "
           "ORDER BY end_index DESC, created_at DESC LIMIT 1")


def current(conn: Conn, session_id: str) -> tuple[list[dict[str, Any]], str | None, str | None]:
    """What a turn reads of its transcript, in one statement (one snapshot): the
    messages from the latest compaction's ``end_index`` on, with ``index``, that
    compaction's summary and its id (None, None: never compacted). The summary
    comes as a first row of its own, the messages after it."""
    columns = ", ".join(f"m.{c}" for c in MESSAGE_COLUMNS[1:])
    nulls = ", ".join(f"NULL AS {c}" for c in MESSAGE_COLUMNS[1:])
    rows = conn.execute(
        f"SELECT 0 AS part, c.end_index AS idx, c.summary, c.compaction_id AS mark, {nulls} "
        f"FROM ({_LATEST.format('end_index, summary, compaction_id')}) c "
        f"UNION ALL SELECT 1 AS part, m.idx, NULL AS summary, NULL AS mark, {columns} "
        f"FROM messages m WHERE m.session_id = ? "
        f"AND m.idx >= COALESCE(({_LATEST.format('end_index')}), 0) "
        f"ORDER BY part, idx", (session_id, session_id, session_id)).fetchall()
    compacted = bool(rows) and rows[0]["part"] == 0
    return ([message_of(r, True) for r in rows if r["part"] == 1],
            rows[0]["summary"] if compacted else None, rows[0]["mark"] if compacted else None)


def since(conn: Conn, session_id: str, index: int,
          most: int) -> tuple[str | None, list[dict[str, Any]]] | None:
    """What a transcript gained from position ``index`` on, in one statement: (the
    latest compaction's id, None if none; the messages from ``index`` on, with
    ``index``). None if there are more than ``most`` of them."""
    columns = ", ".join(f"m.{c}" for c in MESSAGE_COLUMNS[1:])
    nulls = ", ".join(f"NULL AS {c}" for c in MESSAGE_COLUMNS[1:])
    rows = conn.execute(
        f"SELECT 0 AS part, 0 AS idx, ({_LATEST.format('compaction_id')}) AS mark, {nulls} "
        f"UNION ALL SELECT * FROM (SELECT 1 AS part, m.idx, NULL AS mark, {columns} "
        f"FROM messages m WHERE m.session_id = ? AND m.idx >= ? ORDER BY m.idx LIMIT ?) t "
        f"ORDER BY part, idx", (session_id, session_id, index, most + 1)).fetchall()
    if len(rows) > most + 1:
        return None
    return rows[0]["mark"], [message_of(r, True) for r in rows[1:]]


def list_for(conn: Conn, session_id: str) -> list[dict[str, Any]]:
    """Every record of the session, oldest first."""
    rows = conn.execute(f"{_SELECT} WHERE session_id = ? ORDER BY end_index, created_at",
                        (session_id,))
    return [_row(r) for r in rows]
