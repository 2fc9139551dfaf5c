"""Queries for the `events` table: each session's durable, gap-free event log."""

from __future__ import annotations

from typing import Any

from ..conn import Conn, send, serialise_session

__all__ = ["append", "append_later", "since", "last_seq", "payloads_of_type", "of_admission",
           "newest_of_types"]


def append(conn: Conn, session_id: str, type_: str, payload_json: str,
           admission_id: str | None, now: float, last_seq: int | None = None) -> int:
    """Append one event and return its seq (previous max + 1, so gap-free even
    when a surrounding unit rolls back). ``last_seq``: the session's last seq,
    when the caller knows it in this same transaction (it saves a SELECT)."""
    # Two plain statements: one INSERT with the MAX as a scalar subquery and a
    # RETURNING clause costs two to three times as much (an event is appended for
    # every step of every turn). The caller's transaction keeps the pair atomic.
    if last_seq is None:
        serialise_session(conn, session_id)
        (last,) = conn.execute("SELECT MAX(seq) FROM events WHERE session_id = ?",
                               (session_id,)).fetchone()
        last_seq = last or 0
    seq = last_seq + 1
    # nothing waits for it on PostgreSQL: under the session's lock, the number is free
    send(conn,
         "INSERT INTO events(session_id, seq, type, admission_id, payload_json, created_at) "
         "VALUES (?, ?, ?, ?, ?, ?)",
         (session_id, seq, type_, admission_id, payload_json, now))
    return seq


def append_later(conn: Conn, session_id: str, type_: str, payload_json: str,
                 admission_id: str | None, now: float) -> Any:
    """PostgreSQL: append one event in one statement that nothing waits for; its
    seq (previous max + 1, under the session's lock) is ``fetchone()[0]`` of the
    returned cursor once the transaction committed."""
    serialise_session(conn, session_id)
    return send(conn,
                "INSERT INTO events(session_id, seq, type, admission_id, payload_json, "
                "created_at) SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM events "
                "WHERE session_id = ? RETURNING seq",
                (session_id, type_, admission_id, payload_json, now, session_id))


def since(conn: Conn, session_id: str, after_seq: int, limit: int,
          max_bytes: int | None = None) -> list[dict[str, Any]]:
    """Events after ``after_seq`` in seq order: at most ``limit``, and with
    ``max_bytes``, no more once their payloads reach that many characters (at
    least one event is always returned, however large)."""
    rows = conn.execute(
        "SELECT seq, type, admission_id, payload_json FROM events "
        "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (session_id, after_seq, limit),
    )
    if max_bytes is None:
        return [dict(r) for r in rows]
    out: list[dict[str, Any]] = []
    size = 0
    for r in rows:
        out.append(dict(r))
        size += len(r["payload_json"])
        if size >= max_bytes:
            break
    return out


def last_seq(conn: Conn, session_id: str) -> int:
    (seq,) = conn.execute(
        "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?", (session_id,)
    ).fetchone()
    return int(seq)


def payloads_of_type(conn: Conn, session_id: str, type_: str) -> list[str]:
    """The payload_json of every event of ``type_`` in the session, in seq order."""
    rows = conn.execute("SELECT payload_json FROM events WHERE session_id = ? AND type = ? "
                        "ORDER BY seq", (session_id, type_))
    return [r[0] for r in rows]


def newest_of_types(conn: Conn, session_id: str, types: tuple[str, ...],
                    limit: int) -> list[tuple[str, str]]:
    """(type, payload_json) of the session's newest ``limit`` events of ``types``,
    newest first (read backwards along the session's seqs)."""
    marks = ", ".join("?" * len(types))
    rows = conn.execute(
        f"SELECT type, payload_json FROM events WHERE session_id = ? AND type IN ({marks}) "
        "ORDER BY seq DESC LIMIT ?", (session_id, *types, limit))
    return [(r[0], r[1]) for r in rows]


def of_admission(conn: Conn, session_id: str, admission_id: str,
                 types: tuple[str, ...]) -> list[tuple[str, str]]:
    """(type, payload_json) of the admission's events of ``types``, in seq order."""
    marks = ", ".join("?" * len(types))
    rows = conn.execute(
        f"SELECT type, payload_json FROM events WHERE session_id = ? AND admission_id = ? "
        f"AND type IN ({marks}) ORDER BY seq", (session_id, admission_id, *types))
    return [(r[0], r[1]) for r in rows]
