"""Queries for the `sessions` table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from ..conn import Conn, send

__all__ = ["insert", "get", "get_later", "get_by_request", "list_page", "touch", "add_usage",
           "usage_later", "title_if_untitled"]

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


def get_later(conn: Conn, session_id: str) -> Callable[[], dict[str, Any] | None]:
    """`get`, its answer read when the returned function is called: on PostgreSQL the
    statement rides with the next one the unit waits for."""
    cur = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,))
    return lambda: _row(cur.fetchone())


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


def usage_later(conn: Conn, session_id: str) -> Callable[[], dict[str, Any] | None]:
    """The session's usage sums ({model: {counter: n}}; None: no such session), read
    when the returned function is called: on PostgreSQL the statement rides with
    the next one the unit waits for. For `add_usage`."""
    cur = conn.execute("SELECT usage_json FROM sessions WHERE session_id = ?", (session_id,))

    def sums() -> dict[str, Any] | None:
        row = cur.fetchone()
        return None if row is None else (orjson.loads(row[0]) if row[0] else {})

    return sums


def add_usage(conn: Conn, session_id: str, model: str, usage: dict[str, int],
              requests: int = 0,
              read: Callable[[], dict[str, Any] | None] | None = None) -> dict[str, Any] | None:
    """Add one turn's (or compaction's) token counters to the session's sums for
    ``model`` (sessions.usage_json: {model: {counter: n, "requests": n}}); the sums
    as they are now. ``read``: the sums as `usage_later` asked for them earlier in
    this unit (else they are read here, if there is anything to add). None: no such
    session, or nothing to add and nothing read."""
    if read is None and not usage and not requests:
        return None
    sums = (read or usage_later(conn, session_id))()
    if sums is None or (not usage and not requests):
        return sums
    mine = sums.setdefault(model or "unknown", {})
    for key, value in usage.items():
        if isinstance(value, int) and not isinstance(value, bool):
            mine[key] = mine.get(key, 0) + value
    if requests:
        mine["requests"] = mine.get("requests", 0) + requests
    stored = orjson.dumps(sums, option=orjson.OPT_SORT_KEYS).decode()
    send(conn, "UPDATE sessions SET usage_json = ? WHERE session_id = ?", (stored, session_id))
    return orjson.loads(stored)  # as a later read would give them (keys sorted)


def title_if_untitled(conn: Conn, session_id: str, title: str) -> None:
    """Give an untitled session ``title`` (a titled one keeps its own). Nothing
    waits for it on PostgreSQL (`send`)."""
    send(conn, "UPDATE sessions SET title = ? WHERE session_id = ? AND "
               "(title IS NULL OR title = '')", (title, session_id))
