"""PostgreSQL's part of a group commit (group_commit.py): the writer connection.

Connecting, BEGIN, a SAVEPOINT per unit, the statements a group sends once
before COMMIT, COMMIT in pipeline mode, and settling a COMMIT whose answer was
lost. db.py's module docstring says what the writer promises; this module is
how.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import StorageError, translate
from ..group_commit import GroupFailed
from .connection import PgConn, Trips, gathered

__all__ = ["PgWriter"]


class PgWriter:
    """The writer connection (connected on the writer's thread, again after a failure)."""

    def __init__(self, connect: Callable[[], Any], trips: Trips, *, pipelined: bool,
                 outage_seconds: float) -> None:
        self._connect = connect
        self.trips = trips
        # psycopg's pipeline mode (libpq 14 or later; the binary package bundles one)
        self.pipelined = pipelined
        #: how long the writer tries to learn the outcome of a COMMIT whose answer was lost
        self.outage_seconds = outage_seconds
        self.raw: Any = None  # the psycopg connection
        self.before_group: Callable[[Any], None] | None = None
        self._conn: PgConn | None = None  # the group in flight's
        self._xid: Any = None  # its transaction id's answer

    def connect(self) -> Callable[[], None] | None:
        if self.raw is None or self.raw.closed:
            # (re)connecting takes round trips and may wait on the network: off the loop
            return self._reconnect
        return None

    def _reconnect(self) -> None:
        self.raw = self._connect()

    def begin(self) -> None:
        # on the loop, as SQLite's units: they may touch the owner's in-memory state.
        # In pipeline mode what needs no answer (BEGIN, SAVEPOINT, RELEASE, a locked
        # event's INSERT, the NOTIFY) rides along with what does; COMMIT and the
        # group's last answers travel together from the writer's thread.
        conn = self._conn = PgConn(self.raw, self.trips, self.pipelined)
        if self.before_group is not None:
            self.before_group(conn)
        conn.send("BEGIN")
        # the transaction's id, learnt before COMMIT (see settle_commit)
        self._xid = conn.execute("SELECT txid_current()")

    def run_unit(self, index: int, unit: Callable[[Any], Any]) -> tuple[bool, Any]:
        conn, raw = self._conn, self.raw
        assert conn is not None
        conn.unit = index
        try:
            conn.send("SAVEPOINT unit")  # sending reads what came back: an earlier failure
        except Exception as exc:  # noqa: BLE001 - judged below
            self._failed_before(exc)
            raise
        asked = {key: len(items) for key, items in conn.deferred.items()}
        try:
            value = unit(conn)
            conn.settle_unit()
            # sending it may bring back the failure of a statement this unit sent
            # without waiting (a guard that refused): the unit fails alone then
            conn.send("RELEASE SAVEPOINT unit")
        except Exception as exc:  # noqa: BLE001 - the unit's failure is its caller's
            if raw.closed or raw.broken:
                raise  # the connection failed: the whole group does
            culprit, conn.culprit = conn.culprit, None
            if culprit is not None and culprit != index:
                # what failed was sent by a unit before this one (already
                # released): only rolling back the whole group undoes it
                self.discard()
                raise GroupFailed(culprit, translate(exc)) from exc
            conn.send("ROLLBACK TO SAVEPOINT unit")
            conn.send("RELEASE SAVEPOINT unit")
            for key, items in list(conn.deferred.items()):  # its requests go with it
                if key not in asked:
                    del conn.deferred[key]
                elif len(items) > asked[key]:
                    conn.deferred[key] = dict.fromkeys(list(items)[:asked[key]])
            return False, translate(exc)
        return True, value

    def _failed_before(self, exc: Exception) -> None:
        """Sending a statement of the group's own (a SAVEPOINT, the statements before
        COMMIT) brought back the failure of a unit's statement nobody waited for:
        raise `GroupFailed` for that unit; a failed connection fails the group as
        it is (the caller raises ``exc``)."""
        conn, raw = self._conn, self.raw
        assert conn is not None
        culprit, conn.culprit = conn.culprit, None
        if raw.closed or raw.broken or culprit is None or culprit < 0:
            return
        self.discard()
        raise GroupFailed(culprit, translate(exc)) from exc

    def before_commit(self) -> None:
        conn = self._conn
        assert conn is not None
        conn.unit = -1
        try:
            for (sql, params), items in list(conn.deferred.items()):
                conn.send(sql, (*params, gathered(items)) if items else params)
        except Exception as exc:  # noqa: BLE001 - judged here
            self._failed_before(exc)
            raise

    def commit_here(self, units: int) -> bool:
        return False  # COMMIT is a round trip whatever the group did: off the loop

    def commit(self) -> None:
        # on the writer's thread: the round trip that waits for the server's fsync
        conn, raw = self._conn, self.raw
        assert conn is not None
        try:
            (xid,) = self._xid.fetchone()  # answered long ago, unless no unit waited
        except BaseException as exc:
            lost = raw.closed or raw.broken
            self.discard()  # before COMMIT: the server rolls the group back
            if not lost and conn.culprit is not None and conn.culprit >= 0:
                # a unit's statement nobody waited for failed (a fence that refused)
                raise GroupFailed(conn.culprit, translate(exc)) from exc
            raise
        try:
            if conn.pipeline is None:
                conn.execute("COMMIT")
            else:
                conn.send("COMMIT")
                conn.leave_pipeline()  # the sync: every answer, COMMIT's last
        except BaseException as exc:
            lost = raw.closed or raw.broken
            self.discard()
            if lost:
                self.settle_commit(xid, exc)
                return
            if conn.culprit is not None and conn.culprit >= 0:
                raise GroupFailed(conn.culprit, translate(exc)) from exc
            raise  # the server answered: it did not commit

    def abort(self, exc: BaseException) -> BaseException:
        self.discard()  # the connection failed: the next group connects again
        return translate(exc)

    def settle_commit(self, xid: int, exc: BaseException) -> None:
        """The connection broke during COMMIT: connect again and ask the server
        whether transaction ``xid`` committed. Returns if it did; raises a
        StorageError if it did not (transient) or if nobody could tell within
        ``outage_seconds`` (``ambiguous``)."""
        deadline = time.monotonic() + self.outage_seconds
        delay = 0.05
        detail = str(exc).strip() or type(exc).__name__
        while True:
            try:
                if self.raw is None:
                    self.raw = self._connect()
                (status,) = self.raw.execute("SELECT txid_status(%s)", (xid,)).fetchone()
            except Exception as again:  # noqa: BLE001 - still unreachable: wait and ask again
                self.discard()
                detail = str(again).strip() or detail
                status = "unreachable"
            if status == "committed":
                return
            if status == "aborted":
                raise StorageError(f"the connection was lost during COMMIT, which did not "
                                   f"take effect: {detail}", "database_unreachable")
            if status is None:  # too old to know: cannot happen within seconds
                break
            if time.monotonic() + delay > deadline:
                break
            time.sleep(delay)  # "in progress" (the old backend is ending) or unreachable
            delay = min(delay * 2, 1.0)
        raise StorageError(f"the connection was lost during COMMIT and whether it took "
                           f"effect is unknown: {detail}", "database_unreachable",
                           ambiguous=True)

    def discard(self) -> None:
        raw, self.raw = self.raw, None
        if raw is not None:
            try:
                raw.close()  # an open transaction is rolled back by the server
            except Exception:  # noqa: BLE001 - it is being thrown away
                pass
