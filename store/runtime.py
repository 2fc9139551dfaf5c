"""Queries for the `runtime` key/value table: the owner epoch (tokens: tokens.py)."""

from __future__ import annotations

import sqlite3

__all__ = ["bump_epoch", "current_epoch"]


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
