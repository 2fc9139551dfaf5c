"""Queries for the fleet's tables (PostgreSQL only): nodes and session leases.

A node is one owner process on the shared database, known by its epoch (unique:
``runtime.bump_epoch`` is one statement). It is alive while its row's
``expires_at`` lies ahead; its heartbeat moves that, and the expiry of every
lease it holds, forward. A session's lease names the node that runs its turns;
``generation`` grows each time the lease changes hands, and every write the
holder makes for the session's turn checks it (``fence``), under a row lock the
successor's takeover has to wait for; the check rides with the unit's own
statements and costs no round trip of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..conn import Conn

__all__ = [
    "register", "heartbeat", "set_address", "set_state", "alive", "take", "take_admitted", "fence", "release_idle",
    "release_all", "claim_dead", "unplaced_queued", "lock_claimable", "held_open", "list_nodes", "request_stop",
    "stops_for",
]


def register(conn: Conn, *, node_id: str, epoch: int, address: str | None, pid: int,
             host: str, home: str, now: float, ttl: float) -> int:
    """Add this node, serving. A node that ran from the same home on the same host
    is gone for sure (this one holds the home's lock): its life is ended now, so
    its work is recovered at once rather than when its lease would run out.
    Returns how many such nodes there were."""
    ended = conn.execute(
        "UPDATE nodes SET expires_at = 0 WHERE host = ? AND home = ? "
        "AND state IN ('serving', 'draining')", (host, home)).rowcount
    conn.execute(
        "INSERT INTO nodes(node_id, epoch, address, pid, host, home, state, started_at, "
        "heartbeat_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, 'serving', ?, ?, ?)",
        (node_id, epoch, address, pid, host, home, now, now, now + ttl))
    return int(ended)


def heartbeat(conn: Conn, epoch: int, now: float, ttl: float) -> bool:
    """Extend the node's life and every lease it holds; False when the node was
    declared dead meanwhile (it paused past its lease: it must stop)."""
    alive_now = conn.execute(
        "UPDATE nodes SET heartbeat_at = ?, expires_at = ? "
        "WHERE epoch = ? AND state IN ('serving', 'draining')",
        (now, now + ttl, epoch)).rowcount == 1
    if alive_now:
        conn.execute("UPDATE session_leases SET expires_at = ? WHERE holder_epoch = ?",
                     (now + ttl, epoch))
    return alive_now


def set_address(conn: Conn, epoch: int, address: str | None) -> None:
    conn.execute("UPDATE nodes SET address = ? WHERE epoch = ?", (address, epoch))


def set_state(conn: Conn, epoch: int, state: str) -> None:
    conn.execute("UPDATE nodes SET state = ? WHERE epoch = ? AND state != 'dead'",
                 (state, epoch))


def alive(conn: Conn, epoch: int) -> bool:
    row = conn.execute("SELECT state FROM nodes WHERE epoch = ?", (epoch,)).fetchone()
    return row is not None and row[0] in ("serving", "draining")


_TAKE = (
    "INSERT INTO session_leases(session_id, holder_epoch, generation, expires_at) "
    "SELECT ?, ?, 1, ? WHERE EXISTS (SELECT 1 FROM nodes WHERE epoch = ? "
    "                                AND state = 'serving') {admitted}"
    "ON CONFLICT(session_id) DO UPDATE SET holder_epoch = excluded.holder_epoch, "
    "expires_at = excluded.expires_at, generation = CASE "
    "  WHEN session_leases.holder_epoch = excluded.holder_epoch "
    "  THEN session_leases.generation ELSE session_leases.generation + 1 END "
    "WHERE session_leases.holder_epoch IS NULL OR session_leases.expires_at < ? "
    "   OR session_leases.holder_epoch = excluded.holder_epoch "
    "RETURNING generation")
_TAKE_ANY = _TAKE.format(admitted="")
_TAKE_ADMITTED = _TAKE.format(
    admitted="AND EXISTS (SELECT 1 FROM session_admissions WHERE admission_id = ?) ")


def take(conn: Conn, session_id: str, epoch: int, now: float, ttl: float) -> int | None:
    """Hold the session's lease: new, free, expired, or already this node's. The
    generation it is held at, or None while another live node holds it. A node
    that is no longer serving (draining, or declared dead) takes nothing."""
    row = conn.execute(_TAKE_ANY, (session_id, epoch, now + ttl, epoch, now)).fetchone()
    return None if row is None else int(row[0])


def take_admitted(conn: Conn, session_id: str, admission_id: str, epoch: int, now: float,
                  ttl: float) -> Callable[[], int | None]:
    """`take`, only if this transaction holds admission ``admission_id`` (inserted by
    a statement sent just before, whose answer is not known yet): the statement is
    sent without waiting, and the returned function gives the generation (None: not
    taken, or not admitted) once that answer came, with the admission's."""
    cur = conn.execute(_TAKE_ADMITTED, (session_id, epoch, now + ttl, epoch, admission_id,
                                        now))

    def generation() -> int | None:
        row = cur.fetchone()
        return None if row is None else int(row[0])

    return generation


#: fails (division by zero: pg.connection.REFUSED) unless the lease is held as asked
_FENCE = ("SELECT 1 / COUNT(*) FROM (SELECT 1 FROM session_leases WHERE session_id = ? "
          "AND holder_epoch = ? AND generation = ? FOR SHARE) held")


def fence(conn: Conn, session_id: str, epoch: int, generation: int,
          refusal: Callable[[], BaseException]) -> None:
    """Refuse the unit unless this node still holds the session at ``generation``.
    The lease's row stays share-locked until the transaction ends, so a takeover
    waits for this write. Sent first in the unit and not waited for
    (`PgConn.guard`): the unit's statements after it are skipped by the server if
    it refused, and ``refusal()`` is raised at the unit's next wait, or else at its
    group's COMMIT (which then rolls the whole group back)."""
    conn.guard(_FENCE, (session_id, epoch, generation), refusal)  # type: ignore[attr-defined]


def release_idle(conn: Conn, epoch: int, keep: list[str]) -> list[str]:
    """Let go of every lease this node holds but for ``keep`` (sessions with work
    here); the sessions released."""
    rows = conn.execute(
        "UPDATE session_leases SET holder_epoch = NULL WHERE holder_epoch = ? "
        "AND NOT (session_id = ANY(?)) RETURNING session_id", (epoch, keep)).fetchall()
    return [r[0] for r in rows]


def release_all(conn: Conn, epoch: int) -> None:
    conn.execute("UPDATE session_leases SET holder_epoch = NULL WHERE holder_epoch = ?",
                 (epoch,))


def claim_dead(conn: Conn, now: float) -> dict[str, Any] | None:
    """One node whose life ran out, marked dead and its leases freed (each one's
    generation moved on, so its late writes are refused); None if there is none.
    Nodes recovering the fleet at the same time each claim a different one."""
    row = conn.execute(
        "SELECT node_id, epoch FROM nodes WHERE expires_at < ? "
        "AND state IN ('serving', 'draining') ORDER BY epoch LIMIT 1 FOR UPDATE SKIP LOCKED",
        (now,)).fetchone()
    if row is None:
        return None
    conn.execute("UPDATE nodes SET state = 'dead' WHERE epoch = ?", (row[1],))
    conn.execute("UPDATE session_leases SET holder_epoch = NULL, generation = generation + 1 "
                 "WHERE holder_epoch = ?", (row[1],))
    return {"node_id": row[0], "epoch": int(row[1])}


def unplaced_queued(conn: Conn, now: float, limit: int) -> list[str]:
    """Sessions with queued admissions whose lease is free or has run out: work
    that no live node is going to run."""
    rows = conn.execute(
        "SELECT DISTINCT a.target_session_id FROM session_admissions a "
        "LEFT JOIN session_leases l ON l.session_id = a.target_session_id "
        "WHERE a.status IN ('queued', 'unknown') "
        "AND (l.session_id IS NULL OR l.holder_epoch IS NULL OR l.expires_at < ?) LIMIT ?",
        (now, limit)).fetchall()
    return [r[0] for r in rows]


def lock_claimable(conn: Conn, session_ids: list[str], now: float) -> list[str]:
    """Of ``session_ids``, those whose lease is still free or run out, row-locked
    for this transaction; a lease another node is claiming right now is skipped
    (``FOR UPDATE SKIP LOCKED``), not waited for. Sessions with no lease row at
    all are claimable too (their admission was recorded by a node not serving)."""
    rows = conn.execute(
        "SELECT session_id FROM session_leases WHERE session_id = ANY(?) "
        "AND (holder_epoch IS NULL OR expires_at < ?) FOR UPDATE SKIP LOCKED",
        (session_ids, now)).fetchall()
    locked = {r[0] for r in rows}
    have = {r[0] for r in conn.execute(
        "SELECT session_id FROM session_leases WHERE session_id = ANY(?)", (session_ids,))}
    return [sid for sid in session_ids if sid in locked or sid not in have]


def held_open(conn: Conn, epoch: int) -> list[dict[str, Any]]:
    """The open admissions of every session this node holds, in admission order."""
    rows = conn.execute(
        "SELECT a.target_session_id, a.admission_id, a.status FROM session_admissions a "
        "JOIN session_leases l ON l.session_id = a.target_session_id "
        "WHERE l.holder_epoch = ? AND a.status != 'terminal' ORDER BY a.seq", (epoch,))
    return [dict(r) for r in rows]


def request_stop(conn: Conn, session_id: str, admission_id: str | None,
                 now: float) -> str | None:
    """Ask the holder to stop the session's started turn (``admission_id``'s, when
    given); the admission asked about, or None when none is started."""
    row = conn.execute(
        "SELECT admission_id FROM session_admissions WHERE target_session_id = ? "
        "AND status = 'started'" + (" AND admission_id = ?" if admission_id else ""),
        (session_id, *([admission_id] if admission_id else []))).fetchone()
    if row is None:
        return None
    conn.execute("INSERT INTO turn_stops(admission_id, session_id, requested_at) "
                 "VALUES (?, ?, ?) ON CONFLICT(admission_id) DO NOTHING",
                 (row[0], session_id, now))
    return str(row[0])


def stops_for(conn: Conn, epoch: int) -> list[tuple[str, str]]:
    """(session_id, admission_id) of the stops asked for sessions this node holds;
    they are taken (deleted) here, and stale ones (ended turns) dropped."""
    conn.execute("DELETE FROM turn_stops t WHERE NOT EXISTS (SELECT 1 FROM "
                 "session_admissions a WHERE a.admission_id = t.admission_id "
                 "AND a.status = 'started')")
    rows = conn.execute(
        "DELETE FROM turn_stops t USING session_leases l WHERE l.session_id = t.session_id "
        "AND l.holder_epoch = ? RETURNING t.session_id, t.admission_id", (epoch,)).fetchall()
    return [(r[0], r[1]) for r in rows]


def list_nodes(conn: Conn) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT n.node_id, n.epoch, n.address, n.pid, n.host, n.state, n.started_at, "
        "n.heartbeat_at, n.expires_at, (SELECT COUNT(*) FROM session_leases l "
        "WHERE l.holder_epoch = n.epoch) AS leases FROM nodes n ORDER BY n.epoch")
    return [dict(r) for r in rows]
