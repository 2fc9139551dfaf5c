"""The PostgreSQL connection as the query modules see it, and its round trips.

`PgConn` wraps a psycopg connection so that the query modules, written once in
the SQL both backends accept with ``?`` placeholders, run on it: placeholders
are rewritten, booleans passed as integers, a broken constraint raised as
``sqlite3.IntegrityError``. In pipeline mode (store/pg/db.py) a statement is sent
without waiting and `Answer` waits when its answer is looked at. `Trips`
counts the waits: `round_trips` is what ``tether bench --store`` reports.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from typing import Any

__all__ = ["PgConn", "PgRow", "Answer", "Trips", "round_trips", "row_factory", "to_pg",
           "params_of", "own_error", "forget_prepared", "COUNTED", "REFUSED"]


@lru_cache(maxsize=1024)
def to_pg(sql: str) -> str:
    """A query module's statement in psycopg's placeholders: ``?`` → ``%s``
    (and a literal ``%`` doubled). The query modules use no ``?`` in literals."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgRow(tuple):  # noqa: SLOT000
    """A row that answers ``row[0]``, ``row["name"]`` and ``dict(row)``, as sqlite3.Row."""

    __slots__ = ()
    _names: tuple[str, ...] = ()

    def keys(self) -> tuple[str, ...]:
        return self._names

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names.index(key))
        return tuple.__getitem__(self, key)


def row_factory(cursor: Any) -> Callable[[Any], PgRow]:
    """psycopg's row factory: the row type of the result's columns. Called for every
    statement's result (one with no columns too), so the type is made once per
    set of column names, read off the result itself (``cursor.description``
    builds a Column object per field)."""
    res = cursor.pgresult
    if res is None or not res.nfields:
        return PgRow
    return _row_type(tuple(res.fname(i) for i in range(res.nfields)), cursor.connection)


def _row_type(raw: tuple[bytes | None, ...], conn: Any) -> type[PgRow]:
    row_type = _ROW_TYPES.get(raw)
    if row_type is None:
        encoding = conn.info.encoding
        names = tuple(b.decode(encoding) if b is not None else "" for b in raw)
        row_type = type("Row", (PgRow,), {"__slots__": (), "_names": names})
        if len(_ROW_TYPES) < 4096:  # the statements are the query modules': a few hundred
            _ROW_TYPES[raw] = row_type
    return row_type


#: the row type of each set of column names seen (raw, as the server sent them)
_ROW_TYPES: dict[tuple[bytes | None, ...], type[PgRow]] = {}


def params_of(params: Any) -> Any:
    # SQLite stores booleans as 0/1 and the query modules pass them so; PostgreSQL's
    # integer columns refuse a boolean parameter
    if not params:
        return None
    return tuple(int(p) if isinstance(p, bool) else p for p in params)


class Trips:
    """Round trips to the server: each time a node waits for the server's answer
    (a statement sent on its own, or a batch of them at a pipeline's sync)."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def add(self, k: int = 1) -> None:
        with _TRIPS_LOCK:  # the writer and the readers count from several threads
            self.n += k


_TRIPS_LOCK = threading.Lock()


#: every open store's count, for round_trips()
COUNTED: weakref.WeakSet[Any] = weakref.WeakSet()


def round_trips() -> int:
    """Round trips to PostgreSQL made by every store of this process so far (the
    bench reads it from its nodes)."""
    return sum(db.trips.n for db in list(COUNTED))


#: the longest list of gathered items sent as they are; a longer one is sent as "*"
#: (PostgreSQL refuses a NOTIFY payload of 8,000 bytes or more)
GATHER_MAX_CHARS = 7000


def gathered(items: Iterable[str]) -> str:
    """The items for a gathering statement's last parameter: joined by spaces, or "*"
    (every one, unnamed) when they would not fit GATHER_MAX_CHARS."""
    text = " ".join(items)
    return text if len(text) <= GATHER_MAX_CHARS else "*"


class PgConn:
    """A psycopg connection as the query modules expect a connection to be.

    In pipeline mode (``pipeline`` set: the writer's groups, the reads) a
    statement is sent without waiting for its answer: `Answer` waits, for
    everything sent so far at once, only when its rows or rowcount are looked
    at. ``send`` is for a statement the unit needs no answer from: nothing
    waits for it until something else does. When a wait fails, the statement
    that failed is the first one sent since the last wait that got no answer,
    and ``culprit`` names the unit that sent it (``unit`` is set by the writer
    before each unit; -1 for the group's own statements)."""

    dialect = "postgresql"
    __slots__ = ("raw", "deferred", "trips", "pipeline", "_cm", "unanswered", "sent", "unit",
                 "culprit", "guards")

    def __init__(self, raw: Any, trips: Trips | None = None, pipelined: bool = False) -> None:
        self.raw = raw
        self.trips = trips if trips is not None else Trips()
        self._cm: Any = None
        self.pipeline: Any = None
        if pipelined:
            self.enter_pipeline()
        # statements to run once, right before the group's COMMIT (before_commit),
        # each with the items the group's units gathered for its last parameter
        self.deferred: dict[tuple[str, tuple[Any, ...]], dict[str, None]] = {}
        self.unanswered: Any = None  # the last statement sent, if its answer has not come
        self.sent: list[tuple[int, Any]] = []  # (unit, cursor) sent since the last wait
        self.unit = -1
        self.culprit: int | None = None  # the unit whose statement failed the last wait
        # guards sent since the last wait (see guard): the cursor's id -> its refusal
        self.guards: dict[int, Callable[[], BaseException]] = {}

    def before_commit(self, sql: str, parameters: tuple[Any, ...] = (),
                      gather: Iterable[str] = ()) -> None:
        """Run ``sql`` once, right before this transaction commits: the same
        statement asked for by several units of a group runs once. For what a
        commit does once however many units it holds (announcing itself with
        NOTIFY, daemon/fleet/feed.py). A unit that fails takes its requests back.

        With ``gather``, the statement has one more ``?`` than ``parameters``: it
        gets every item the group's units gathered for it, once each, in order,
        joined by spaces (`gathered`)."""
        self.deferred.setdefault((sql, parameters), {}).update(dict.fromkeys(gather))

    def enter_pipeline(self) -> None:
        self._cm = self.raw.pipeline()
        self.pipeline = self._cm.__enter__()

    def leave_pipeline(self) -> None:
        """Leave pipeline mode: a sync, waiting for every answer (one round trip)."""
        cm, self._cm, self.pipeline = self._cm, None, None
        self._answers(lambda: cm.__exit__(None, None, None))

    def wait(self) -> None:
        """Wait for the answers to everything sent so far: one round trip."""
        self._answers(self.pipeline.sync)

    def _answers(self, sync: Callable[[], Any]) -> None:
        self.trips.add()
        try:
            sync()
        except Exception as exc:
            raise self._blame(exc) from exc
        finally:
            self.unanswered = None
            self.sent.clear()
            self.guards.clear()

    def _blame(self, exc: Exception) -> BaseException:
        """An answer came back failed: the first statement sent since the last wait
        that has no answer is the one that failed (those after it were skipped).
        ``culprit`` names its unit; what to raise: a guard's refusal, if it was
        one, else the driver's error as the store's."""
        failed = next(((unit, cur) for unit, cur in self.sent if cur.pgresult is None), None)
        self.culprit = self.unit if failed is None else failed[0]
        forget_prepared(self.raw)
        refusal = None if failed is None else self.guards.get(id(failed[1]))
        if refusal is None or getattr(exc, "sqlstate", None) != REFUSED:
            return own_error(exc)  # a lost connection is not a refusal
        return refusal()

    def guard(self, sql: str, parameters: Any, refusal: Callable[[], BaseException]) -> None:
        """Send a statement that fails with `REFUSED` (a division by zero) when the
        unit must write nothing (a fleet's lease fence, store/fleet.py): nothing
        waits for it. Its writes, sent after
        it, are skipped by the server if it failed; the unit's next wait, or else its
        group's COMMIT, raises ``refusal()`` instead of the driver's error (at the
        COMMIT, as the culprit of a `GroupFailed`: the group is rolled back)."""
        if self.pipeline is None:
            try:
                self.execute(sql, parameters)
            except Exception as exc:
                if getattr(exc, "sqlstate", None) == REFUSED:
                    raise refusal() from exc
                raise
            return
        answer = self.send(sql, parameters)
        self.guards[id(getattr(answer, "_cur", answer))] = refusal

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        if self.pipeline is not None and _large(parameters):
            # libpq's pipeline can stall sending a big message (psycopg issue 685):
            # everything so far is answered, this one goes on its own, and on
            self.leave_pipeline()
            try:
                return self.execute(sql, parameters)
            finally:
                self.enter_pipeline()
        if self.pipeline is None:
            self.trips.add()
        try:
            cur = self.raw.execute(to_pg(sql), params_of(parameters))
        except Exception as exc:
            if self.pipeline is not None:
                # sending also reads the answers already there, and one of them may be
                # an earlier statement's failure: blame it, and end the aborted stretch
                error = self._blame(exc)
                self.trips.add()
                try:
                    self.pipeline.sync()
                except Exception:  # noqa: BLE001 - the failure is already being raised
                    pass
                self.unanswered = None
                self.sent.clear()
                self.guards.clear()
                raise error from exc
            raise own_error(exc) from exc
        if self.pipeline is None:
            return cur
        self.unanswered = cur
        self.sent.append((self.unit, cur))
        return Answer(cur, self)

    def send(self, sql: str, parameters: Any = (), /) -> Any:
        """``execute`` for a statement nobody waits for (see the class); what it
        returns can be read once the group committed."""
        answer = self.execute(sql, parameters)
        self.unanswered = None
        return answer

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> Any:
        if self.pipeline is not None:
            # in a pipeline already: each one is sent, the last one waited for at the
            # unit's end (psycopg's own executemany would wait on every row here)
            last = None
            for params in seq_of_parameters:
                last = self.execute(sql, params)
            return last
        cur = self.raw.cursor()
        self.trips.add()
        try:
            cur.executemany(to_pg(sql), [params_of(p) for p in seq_of_parameters])
        except Exception as exc:
            raise own_error(exc) from exc
        return cur

    def settle_unit(self) -> None:
        """At a unit's end: its last statement must have been answered before the unit
        is judged, if the unit waited for it (see ``send``)."""
        if self.unanswered is not None and self.unanswered.pgresult is None:
            self.wait()
        self.unanswered = None


#: the SQLSTATE a guard fails with when it refuses (division_by_zero: plain SQL has no
#: other way to fail on purpose, and no statement of ours divides by a column)
REFUSED = "22012"


#: parameters past this many characters are not sent in a pipeline (see PgConn.execute)
LARGE_PARAMETERS = 32 * 1024


def _large(parameters: Any) -> bool:
    size = 0
    for p in parameters or ():
        if isinstance(p, str | bytes):
            size += len(p)
    return size > LARGE_PARAMETERS


class Answer:
    """A statement sent in a pipeline; its answer is waited for when looked at."""

    __slots__ = ("_cur", "_conn")

    def __init__(self, cur: Any, conn: PgConn) -> None:
        self._cur = cur
        self._conn = conn

    def _answered(self) -> Any:
        if self._cur.pgresult is None:
            self._conn.wait()
        return self._cur

    @property
    def pgresult(self) -> Any:
        return self._cur.pgresult

    @property
    def rowcount(self) -> int:
        return int(self._answered().rowcount)

    def fetchone(self) -> Any:
        return self._answered().fetchone()

    def fetchall(self) -> list[Any]:
        return list(self._answered().fetchall())

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


def forget_prepared(raw: Any) -> None:
    """After a failure in a pipeline: make psycopg forget the statements it prepared.

    psycopg prepares a statement on its fifth use, and in a pipeline it records the
    name as it sends the statement. When that statement fails, or the server skips
    it after an earlier failure, the server has no such statement, but psycopg
    (3.3) keeps the name, and every later use of the statement on the connection
    fails with "prepared statement … does not exist". Forgetting them all
    (psycopg then sends DEALLOCATE ALL with the next statement) costs the server
    a few parses again; the connection stays usable."""
    prepared = getattr(raw, "_prepared", None)
    if prepared is not None:
        prepared.clear()


def own_error(exc: Exception) -> BaseException:
    # a broken constraint is the unit's own error, as sqlite3.IntegrityError on
    # both backends; everything else stays the driver's until the group fails
    state = getattr(exc, "sqlstate", None)
    if state is not None and state.startswith("23"):
        return sqlite3.IntegrityError(str(exc))
    return exc
