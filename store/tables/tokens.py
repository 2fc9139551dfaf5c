"""Queries for TCP bearer tokens: mint, list, revoke, check, and one-time exchange.

Only a token's SHA-256 is stored. A token with ``expires_at`` stops working then;
a ``once`` token is not a bearer token at all: it can only be exchanged, one
time, for a fresh one (``tether web``'s link), and is deleted when it is.
"""

from __future__ import annotations

from typing import Any

from ..conn import Conn

__all__ = ["consume_once", "insert", "list_all", "revoke", "valid", "valid_id"]


def insert(conn: Conn, token_id: str, token_hash: str, label: str | None,
           now: float, *, expires_at: float | None = None, once: bool = False) -> None:
    conn.execute(
        "INSERT INTO tokens(token_id, token_hash, label, created_at, expires_at, once) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (token_id, token_hash, label, now, expires_at, int(once)),
    )


def list_all(conn: Conn) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT token_id, label, created_at, expires_at, once FROM tokens "
        "ORDER BY created_at, token_id")
    return [{**dict(r), "once": bool(r["once"])} for r in rows]


def revoke(conn: Conn, token_id: str) -> bool:
    """Delete the token; False if there is no such token."""
    return conn.execute("DELETE FROM tokens WHERE token_id = ?", (token_id,)).rowcount > 0


def valid_id(conn: Conn, token_hash: str, now: float) -> str | None:
    """The id of the bearer token with this hash, if it is one and has not expired."""
    found = valid(conn, token_hash, now)
    return None if found is None else found[0]


def valid(conn: Conn, token_hash: str, now: float) -> tuple[str, float | None] | None:
    """(id, expires_at) of the bearer token with this hash, if it is one and has
    not expired."""
    row = conn.execute(
        "SELECT token_id, expires_at FROM tokens WHERE token_hash = ? AND once = 0 "
        "AND (expires_at IS NULL OR expires_at > ?)", (token_hash, now)).fetchone()
    return None if row is None else (str(row[0]), None if row[1] is None else float(row[1]))


def consume_once(conn: Conn, token_hash: str, now: float) -> bool:
    """Delete the unexpired one-time token with this hash; whether there was one."""
    return conn.execute(
        "DELETE FROM tokens WHERE token_hash = ? AND once = 1 "
        "AND (expires_at IS NULL OR expires_at > ?)", (token_hash, now)).rowcount > 0
