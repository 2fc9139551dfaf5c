"""What a unit of work is given: a connection to run statements on, on either backend.

Query modules are written once, in the SQL both SQLite and PostgreSQL accept,
with ``?`` placeholders; they take a `Conn`. On SQLite that is the
``sqlite3.Connection`` itself; on PostgreSQL it is the adapter of pg/connection.py, which
rewrites the placeholders and maps the driver's errors. A constraint a unit
breaks is ``IntegrityError`` on both (the unit's own error: its caller handles
it); every other failure leaves the store as a StorageError.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, TypeVar

__all__ = ["Conn", "Cursor", "IntegrityError", "Store", "dialect", "send",
           "serialise_session"]

T = TypeVar("T")

#: a broken constraint, on either backend (pg/connection.py raises it for the driver's own)
IntegrityError = sqlite3.IntegrityError


class Cursor(Protocol):
    """The part of a DB-API cursor the query modules use."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """The part of a DB-API connection the query modules use. Rows answer both
    ``row[0]`` and ``row["name"]``, and ``dict(row)``."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> Any: ...


def dialect(conn: Conn) -> str:
    """``sqlite`` or ``postgresql``: for the few statements the two spell differently."""
    return str(getattr(conn, "dialect", "sqlite"))


def send(conn: Conn, sql: str, parameters: Any = ()) -> Any:
    """Run a statement whose answer the unit does not need yet and whose failure
    would be a bug, not the unit's own (an INSERT under its session's lock): on
    PostgreSQL it rides in the writer's pipeline and nothing waits for it
    (store/pg/db.py); on SQLite it is ``execute``. Its cursor: what it returns can be
    read once the transaction committed."""
    sender = getattr(conn, "send", None)
    if sender is not None:
        return sender(sql, parameters)
    return conn.execute(sql, parameters)


def serialise_session(conn: Conn, session_id: str) -> None:
    """Hold the session's append lock until this transaction ends.

    A session's events and messages are numbered previous max + 1 in the
    transaction that stores them. On SQLite there is one writer and nothing to
    do; on PostgreSQL several nodes may append to one session at once, and this
    transaction-scoped advisory lock makes the second wait for the first to
    commit, so numbers are gap-free and commit order is seq order."""
    if dialect(conn) == "postgresql":
        send(conn, "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (session_id,))


class Store(Protocol):
    """What the owner uses of a store, either one: sqlite/db.py's `Database` (SQLite) or
    pg/db.py's `PgDatabase` (PostgreSQL)."""

    dialect: str
    #: what the database is, for messages ("SQLite database /home/…/state.db")
    name: str
    commits: int
    before_group: Callable[[Any], None] | None

    async def write(self, unit: Callable[[Any], T],
                    after_commit: Callable[[T], None] | None = None) -> T: ...

    def submit(self, unit: Callable[[Any], T],
               after_commit: Callable[[T], None] | None = None) -> asyncio.Future[T]: ...

    async def read(self, fn: Callable[[Any], T], *, single: bool = False) -> T:
        """``fn(conn)`` off the loop, in one snapshot; ``single``: ``fn`` runs one
        statement (consistent by itself: PostgreSQL wraps no transaction around it)."""

    async def lookup(self, fn: Callable[[Any], T], *, single: bool = False) -> T:
        """``fn(conn)`` for a few rows by key; ``single``: ``fn`` runs one statement
        (consistent by itself: SQLite wraps no transaction around it either)."""

    async def close(self) -> None: ...
