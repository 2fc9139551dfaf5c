"""Queries for the `runtime` key/value table: the owner epoch (tokens: tokens.py)."""

from __future__ import annotations

from ..conn import Conn

__all__ = ["bump_epoch", "current_epoch"]


def current_epoch(conn: Conn) -> int:
    row = conn.execute("SELECT value FROM runtime WHERE key = 'epoch'").fetchone()
    return int(row[0]) if row else 0


def bump_epoch(conn: Conn) -> int:
    """Increment and return the owner epoch (one per owner start; on a shared
    PostgreSQL database, one per node start: the increment is one statement, so
    two nodes starting at once get two epochs)."""
    (epoch,) = conn.execute(
        "INSERT INTO runtime(key, value) VALUES ('epoch', '1') "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(runtime.value AS BIGINT) + 1 AS TEXT) "
        "RETURNING value").fetchone()
    return int(epoch)
