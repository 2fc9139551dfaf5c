"""Queries for `session_admissions`, the ledger of every submitted prompt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..conn import Conn, dialect

__all__ = [
    "COLUMNS", "Admitted", "admit", "insert_new", "find", "get", "mark_started", "finish",
    "open_for_session", "all_open", "mark_unknown_before", "open_count",
]

COLUMNS = (
    "seq", "admission_id", "target_session_id", "principal_id", "request_id", "payload_json",
    "payload_digest", "status", "outcome", "result_json", "owner_epoch", "created_at",
    "started_at", "finished_at",
)
_SELECT = "SELECT " + ", ".join(COLUMNS) + " FROM session_admissions"


def _row(row: Any) -> dict[str, Any] | None:
    return dict(row) if row is not None else None


_INSERT = (
    "INSERT INTO session_admissions(admission_id, target_session_id, principal_id, "
    "request_id, payload_json, payload_digest, status, started_at, owner_epoch, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_RETURNING = " RETURNING " + ", ".join(COLUMNS)


def insert_new(conn: Conn, *, admission_id: str, target_session_id: str,
               principal_id: str, request_id: str, payload_json: str, payload_digest: str,
               owner_epoch: int, now: float, started: bool = False) -> dict[str, Any] | None:
    """Insert a queued admission (``started``: one whose turn starts in this same
    transaction, stamped started now) and return the stored row; None when the
    identity (principal, session, request_id) already exists (the caller then
    finds that row). Other constraints (the session must exist) still raise
    sqlite3.IntegrityError.

    The row is built here rather than read back with RETURNING, which makes
    SQLite materialise the result and costs about a third of the insert; the
    one column only SQLite knows, ``seq``, is the new rowid.
    """
    pg = dialect(conn) == "postgresql"
    cur = conn.execute(
        _INSERT + " ON CONFLICT(principal_id, target_session_id, request_id) DO NOTHING"
        + (" RETURNING seq" if pg else ""),
        (admission_id, target_session_id, principal_id, request_id, payload_json,
         payload_digest, *_stamp(started, now), owner_epoch, now))
    if cur.rowcount != 1:
        return None
    # PostgreSQL has no rowid: its identity column answers through RETURNING
    return _new_row(cur.fetchone()[0] if pg else cur.lastrowid, admission_id,
                    target_session_id, principal_id, request_id, payload_json, payload_digest,
                    owner_epoch, now, started)


def _stamp(started: bool, now: float) -> tuple[str, float | None]:
    """(status, started_at) of a new row: started now, or queued."""
    return ("started", now) if started else ("queued", None)


def _new_row(seq: int, admission_id: str, target_session_id: str, principal_id: str,
             request_id: str, payload_json: str, payload_digest: str, owner_epoch: int,
             now: float, started: bool) -> dict[str, Any]:
    status, started_at = _stamp(started, now)
    return {"seq": seq, "admission_id": admission_id,
            "target_session_id": target_session_id, "principal_id": principal_id,
            "request_id": request_id, "payload_json": payload_json,
            "payload_digest": payload_digest, "status": status, "outcome": None,
            "result_json": None, "owner_epoch": owner_epoch, "created_at": now,
            "started_at": started_at, "finished_at": None}


@dataclass(frozen=True, slots=True)
class Admitted:
    """What `admit` found: whether the session exists, how many admissions it had
    open, and the new row (None: no session, at the bound, or the identity exists)."""

    present: bool
    open: int
    row: dict[str, Any] | None
    #: the session had no title when its bound was read (PostgreSQL: not asked, so
    #: assumed; naming it there is a statement nothing waits for)
    untitled: bool = True
    #: SQLite: the session's last event seq (0: none yet) as its bound was read, for
    #: the unit's own event (PostgreSQL numbers events after the commit: None)
    last_seq: int | None = None


#: PostgreSQL: the session's bound and the insert in one statement, so an admission
#: waits once (the COUNT and the INSERT see one snapshot)
_ADMIT_PG = (
    "WITH s AS (SELECT EXISTS(SELECT 1 FROM sessions WHERE session_id = ?) AS present, "
    "(SELECT COUNT(*) FROM session_admissions WHERE target_session_id = ? "
    "AND status != 'terminal') AS open), "
    "ins AS (INSERT INTO session_admissions(admission_id, target_session_id, principal_id, "
    "request_id, payload_json, payload_digest, status, owner_epoch, created_at, started_at) "
    "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM s WHERE s.present AND s.open < ? "
    "ON CONFLICT(principal_id, target_session_id, request_id) DO NOTHING RETURNING seq) "
    "SELECT s.present, s.open, (SELECT seq FROM ins) FROM s"
)

#: the bound of an admission that has none (the owner's own producers)
UNBOUNDED = 2 ** 62


def admit(conn: Conn, *, admission_id: str, target_session_id: str, principal_id: str,
          request_id: str, payload_json: str, payload_digest: str, owner_epoch: int,
          now: float, bound: int | None, started: bool = False) -> Callable[[], Admitted]:
    """Insert a queued admission (``started``: see `insert_new`) unless the session
    is missing, has ``bound`` open admissions already (None: no bound), or holds
    this identity; what happened is read when the returned function is called.

    SQLite: the bound (which also says whether the session has a title), then
    `insert_new` (two statements). PostgreSQL: one
    statement, sent without waiting: it is answered together with whatever the unit
    sends next and then waits for (the fleet's lease take, fleet.take_admitted)."""
    limit = UNBOUNDED if bound is None else bound
    if dialect(conn) == "postgresql":
        status, started_at = _stamp(started, now)
        cur = conn.execute(_ADMIT_PG, (
            target_session_id, target_session_id, admission_id, target_session_id,
            principal_id, request_id, payload_json, payload_digest, status,
            owner_epoch, now, started_at, limit))

        def answered() -> Admitted:
            present, open_now, seq = cur.fetchone()
            row = None if seq is None else _new_row(
                int(seq), admission_id, target_session_id, principal_id, request_id,
                payload_json, payload_digest, owner_epoch, now, started)
            return Admitted(bool(present), int(open_now), row)

        return answered
    untitled, open_now, last_seq = conn.execute(
        _BOUND, (target_session_id, target_session_id, target_session_id)).fetchone()
    if untitled is None or open_now >= limit:
        done = Admitted(untitled is not None, open_now, None)
    else:
        done = Admitted(True, open_now, insert_new(
            conn, admission_id=admission_id, target_session_id=target_session_id,
            principal_id=principal_id, request_id=request_id, payload_json=payload_json,
            payload_digest=payload_digest, owner_epoch=owner_epoch, now=now,
            started=started), bool(untitled),
            last_seq)
    return lambda: done


#: SQLite: whether the session is untitled (NULL: no such session), its open
#: admissions and its last event seq, in one statement
_BOUND = ("SELECT (SELECT title IS NULL OR title = '' FROM sessions WHERE session_id = ?), "
          "(SELECT COUNT(*) FROM session_admissions WHERE target_session_id = ? "
          "AND status != 'terminal'), "
          "(SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?)")


def find(conn: Conn, principal_id: str, target_session_id: str,
         request_id: str) -> dict[str, Any] | None:
    return _row(conn.execute(
        _SELECT + " WHERE principal_id = ? AND target_session_id = ? AND request_id = ?",
        (principal_id, target_session_id, request_id),
    ).fetchone())


def get(conn: Conn, admission_id: str) -> dict[str, Any] | None:
    return _row(conn.execute(_SELECT + " WHERE admission_id = ?", (admission_id,)).fetchone())


def _in(statuses: tuple[str, ...]) -> str:
    return "status IN (" + ", ".join("?" * len(statuses)) + ")"


def mark_started(conn: Conn, admission_id: str, epoch: int, now: float,
                 from_statuses: tuple[str, ...]) -> dict[str, Any] | None:
    """→ started, stamped with ``epoch``; the started row, or None if its status
    was not one of ``from_statuses``."""
    return _row(conn.execute(
        "UPDATE session_admissions SET status = 'started', owner_epoch = ?, started_at = ? "
        f"WHERE admission_id = ? AND {_in(from_statuses)}" + _RETURNING,
        (epoch, now, admission_id, *from_statuses),
    ).fetchone())


def finish(conn: Conn, admission_id: str, outcome: str, result_json: str | None,
           now: float, from_statuses: tuple[str, ...]) -> bool:
    """→ terminal/outcome; False if its status was not one of ``from_statuses``."""
    cur = conn.execute(
        "UPDATE session_admissions SET status = 'terminal', outcome = ?, result_json = ?, "
        f"finished_at = ? WHERE admission_id = ? AND {_in(from_statuses)}",
        (outcome, result_json, now, admission_id, *from_statuses),
    )
    return cur.rowcount == 1


def open_for_session(conn: Conn, session_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        _SELECT + " WHERE target_session_id = ? AND status != 'terminal' ORDER BY seq",
        (session_id,),
    )
    return [dict(r) for r in rows]


def all_open(conn: Conn) -> list[dict[str, Any]]:
    rows = conn.execute(_SELECT + " WHERE status != 'terminal' ORDER BY seq")
    return [dict(r) for r in rows]


def mark_unknown_before(conn: Conn, epoch: int, from_statuses: tuple[str, ...],
                        only: int | None = None) -> list[str]:
    """→ unknown, for rows in ``from_statuses`` stamped by an epoch older than
    ``epoch`` (SPEC §7), or with ``only``, by that epoch (a dead node of a fleet);
    returns their admission_ids."""
    rows = conn.execute(
        "UPDATE session_admissions SET status = 'unknown' "
        f"WHERE {_in(from_statuses)} AND owner_epoch {'=' if only else '<'} ? "
        "RETURNING admission_id",
        (*from_statuses, only or epoch),
    ).fetchall()
    return [r[0] for r in rows]


def open_count(conn: Conn, session_id: str) -> int | None:
    """The session's open (non-terminal) admissions; None when there is no such session."""
    (exists, n) = conn.execute(
        "SELECT EXISTS(SELECT 1 FROM sessions WHERE session_id = ?), (SELECT COUNT(*) FROM "
        "session_admissions WHERE target_session_id = ? AND status != 'terminal')",
        (session_id, session_id),
    ).fetchone()
    return int(n) if exists else None
