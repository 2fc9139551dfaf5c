"""Queries for the `sessions` table."""

from __future__ import annotations

from typing import Any

import orjson

from .conn import Conn, send

__all__ = ["insert", "get", "get_by_request", "list_page", "touch", "add_usage",
           "title_if_untitled"]

_INSERTED = (
    "session_id, request_id, params_digest, parent_session_id, source, title, cwd, "
    "options_json, created_at, updated_at, message_count"
)
_COLUMNS = _INSERTED + ", usage_json, forked_from, forked_at_seq"


def _row(row: Any) -> dict[str, Any] | None:
    if row is None:
        return None
    out = dict(row)
    out["options"] = orjson.loads(out.pop("options_json"))
    raw = out.pop("usage_json", None)
    out["usage"] = orjson.loads(raw) if raw else {}
    return out


def insert(conn: Conn, *, session_id: str, request_id: str | None,
           params_digest: str | None, parent_session_id: str | None, source: str | None,
           title: str | None, cwd: str | None, options: dict[str, Any], now: float) -> None:
    conn.execute(
        f"INSERT INTO sessions({_INSERTED}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
        (session_id, request_id, params_digest, parent_session_id, source, title, cwd,
         orjson.dumps(options, option=orjson.OPT_SORT_KEYS).decode(), now, now),
    )


def get(conn: Conn, session_id: str) -> dict[str, Any] | None:
    return _row(conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE session_id = ?",
                             (session_id,)).fetchone())


def get_by_request(conn: Conn, request_id: str) -> dict[str, Any] | None:
    return _row(conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE request_id = ?",
                             (request_id,)).fetchone())


def list_page(conn: Conn, limit: int,
              cursor: tuple[float, str] | None) -> list[dict[str, Any]]:
    """Newest-created first; ``cursor`` is the (created_at, session_id) of the last row seen.

    Both keys are written once, at insert, so a page boundary never moves: a
    session that gets a turn while a caller pages keeps its place.
    """
    if cursor is None:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM sessions ORDER BY created_at DESC, session_id DESC LIMIT ?",
            (limit,),
        )
    else:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM sessions WHERE (created_at, session_id) < (?, ?) "
            "ORDER BY created_at DESC, session_id DESC LIMIT ?",
            (cursor[0], cursor[1], limit),
        )
    return [_row(r) for r in rows]  # type: ignore[misc]


def touch(conn: Conn, session_id: str, now: float, added_messages: int = 0) -> None:
    send(conn,
        "UPDATE sessions SET updated_at = ?, message_count = message_count + ? "
        "WHERE session_id = ?",
        (now, added_messages, session_id),
    )


def add_usage(conn: Conn, session_id: str, model: str, usage: dict[str, int],
              requests: int = 0) -> None:
    """Add one turn's (or compaction's) token counters to the session's sums for
    ``model`` (sessions.usage_json: {model: {counter: n, "requests": n}})."""
    if not usage and not requests:
        return
    row = conn.execute("SELECT usage_json FROM sessions WHERE session_id = ?",
                       (session_id,)).fetchone()
    if row is None:
        return
    sums: dict[str, dict[str, int]] = orjson.loads(row[0]) if row[0] else {}
    mine = sums.setdefault(model or "unknown", {})
    for key, value in usage.items():
        if isinstance(value, int) and not isinstance(value, bool):
            mine[key] = mine.get(key, 0) + value
    if requests:
        mine["requests"] = mine.get("requests", 0) + requests
    conn.execute("UPDATE sessions SET usage_json = ? WHERE session_id = ?",
                 (orjson.dumps(sums, option=orjson.OPT_SORT_KEYS).decode(), session_id))


def title_if_untitled(conn: Conn, session_id: str, title: str) -> bool:
    """Give an untitled session ``title``; False if it had one (or is not there)."""
    cur = conn.execute("UPDATE sessions SET title = ? WHERE session_id = ? AND "
                       "(title IS NULL OR title = '')", (title, session_id))
    return cur.rowcount == 1
