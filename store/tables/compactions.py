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


_LATEST = ("SELECT {} FROM compactions WHERE session_id = ? "
           "ORDER BY end_index DESC, created_at DESC LIMIT 1")


def latest(conn: Conn, session_id: str) -> dict[str, Any] | None:
    """The record reaching furthest into the transcript (None: never compacted)."""
    row = conn.execute(_LATEST.format(", ".join(COLUMNS)), (session_id,)).fetchone()
    return None if row is None else _row(row)


def _head_then_messages(head: str, marks: tuple[str, ...], start: str, *,
                        source: str = "", limit: bool = False) -> str:
    """One statement (one snapshot): a head row (``part`` 0) whose ``idx`` and
    ``marks`` columns ``head`` selects (from ``source``, if any), then the
    session's messages (``part`` 1) from position ``start`` on, at most ``?``
    of them if ``limit``; the marks are NULL on a message row, the message's
    columns NULL on the head. Parameters: the head's, the session id, the
    start's, the limit."""
    marks_null = "".join(f"NULL AS {m}, " for m in marks)
    messages = (f"SELECT 1 AS part, m.idx, {marks_null}"
                f"{', '.join(f'm.{c}' for c in MESSAGE_COLUMNS[1:])} "
                f"FROM messages m WHERE m.session_id = ? AND m.idx >= {start}")
    if limit:
        messages = f"SELECT * FROM ({messages} ORDER BY m.idx LIMIT ?) t"
    return (f"SELECT 0 AS part, {head}, "
            f"{', '.join(f'NULL AS {c}' for c in MESSAGE_COLUMNS[1:])}{source} "
            f"UNION ALL {messages} ORDER BY part, idx")


_CURRENT = _head_then_messages(
    "c.end_index AS idx, c.summary, c.compaction_id AS mark", ("summary", "mark"),
    f"COALESCE(({_LATEST.format('end_index')}), 0)",
    source=f" FROM ({_LATEST.format('end_index, summary, compaction_id')}) c")
_SINCE = _head_then_messages(f"0 AS idx, ({_LATEST.format('compaction_id')}) AS mark",
                             ("mark",), "?", limit=True)


def current(conn: Conn, session_id: str) -> tuple[list[dict[str, Any]], str | None, str | None]:
    """What a turn reads of its transcript, in one statement (one snapshot): the
    messages from the latest compaction's ``end_index`` on, with ``index``, that
    compaction's summary and its id (None, None: never compacted). The summary
    comes as a first row of its own, the messages after it."""
    rows = conn.execute(_CURRENT, (session_id, session_id, session_id)).fetchall()
    compacted = bool(rows) and rows[0]["part"] == 0
    return ([message_of(r, True) for r in rows if r["part"] == 1],
            rows[0]["summary"] if compacted else None, rows[0]["mark"] if compacted else None)


def since(conn: Conn, session_id: str, index: int,
          most: int) -> tuple[str | None, list[dict[str, Any]]] | None:
    """What a transcript gained from position ``index`` on, in one statement: (the
    latest compaction's id, None if none; the messages from ``index`` on, with
    ``index``). None if there are more than ``most`` of them."""
    rows = conn.execute(_SINCE, (session_id, session_id, index, most + 1)).fetchall()
    if len(rows) > most + 1:
        return None
    return rows[0]["mark"], [message_of(r, True) for r in rows[1:]]


def list_for(conn: Conn, session_id: str) -> list[dict[str, Any]]:
    """Every record of the session, oldest first."""
    rows = conn.execute(f"{_SELECT} WHERE session_id = ? ORDER BY end_index, created_at",
                        (session_id,))
    return [_row(r) for r in rows]
