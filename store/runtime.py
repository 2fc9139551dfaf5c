"""Queries for the `runtime` key/value table (owner epoch) and TCP tokens."""

from __future__ import annotations

import sqlite3

__all__ = ["bump_epoch", "current_epoch", "insert_token", "token_exists", "token_id_for"]


def current_epoch(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM runtime WHERE key = 'epoch'").fetchone()
    return int(row[0]) if row else 0


def bump_epoch(conn: sqlite3.Connection) -> int:
    """Increment and return the owner epoch (one per owner start)."""
    epoch = current_epoch(conn) + 1
    conn.execute(
        "INSERT INTO runtime(key, value) VALUES ('epoch', ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (str(epoch),),
    )
    return epoch


def insert_token(conn: sqlite3.Connection, token_id: str, token_hash: str, label: str | None,
                 now: float) -> None:
    conn.execute(
        "INSERT INTO tokens(token_id, token_hash, label, created_at) VALUES (?, ?, ?, ?)",
        (token_id, token_hash, label, now),
    )


def token_exists(conn: sqlite3.Connection, token_hash: str) -> bool:
    row = conn.execute("SELECT 1 FROM tokens WHERE token_hash = ?", (token_hash,)).fetchone()
    return row is not None


def token_id_for(conn: sqlite3.Connection, token_hash: str) -> str | None:
    """The id of the token with this hash (what an HTTP request is admitted under)."""
    row = conn.execute("SELECT token_id FROM tokens WHERE token_hash = ?",
                       (token_hash,)).fetchone()
    return None if row is None else str(row[0])
