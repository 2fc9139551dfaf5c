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

__all__ = ["insert", "latest", "list_for", "COLUMNS"]

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


def list_for(conn: Conn, session_id: str) -> list[dict[str, Any]]:
    """Every record of the session, oldest first."""
    rows = conn.execute(f"{_SELECT} WHERE session_id = ? ORDER BY end_index, created_at",
                        (session_id,))
    return [_row(r) for r in rows]
