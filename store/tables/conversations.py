"""Queries for `api_conversations`: an HTTP client's own conversation key,
per token, and the session it names (docs/http.md)."""

from __future__ import annotations

from ..conn import Conn

__all__ = ["get", "insert", "put"]


def get(conn: Conn, token_id: str, key: str) -> str | None:
    """The session this token's conversation ``key`` names, if it has one yet."""
    row = conn.execute("SELECT session_id FROM api_conversations WHERE token_id = ? "
                       "AND conversation_key = ?", (token_id, key)).fetchone()
    return None if row is None else str(row[0])


def insert(conn: Conn, token_id: str, key: str, session_id: str, now: float) -> None:
    conn.execute("INSERT INTO api_conversations(token_id, conversation_key, session_id, "
                 "created_at) VALUES (?, ?, ?, ?)", (token_id, key, session_id, now))


def put(conn: Conn, token_id: str, key: str, session_id: str, now: float) -> None:
    """``insert``, or point an existing key at ``session_id``."""
    conn.execute("INSERT INTO api_conversations(token_id, conversation_key, session_id, "
                 "created_at) VALUES (?, ?, ?, ?) ON CONFLICT(token_id, conversation_key) "
                 "DO UPDATE SET session_id = excluded.session_id, "
                 "created_at = excluded.created_at", (token_id, key, session_id, now))
