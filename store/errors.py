"""The store's one error, and how sqlite3's failures map onto it.

Every sqlite3 or psycopg failure leaves the store as a `StorageError` with a
short ``reason`` (``database_locked``, ``disk_full``, ``read_only``,
``corrupt``, ``storage_error``; ``database_unreachable`` when PostgreSQL's
connection fails; ``closed`` from a closed `Database`), except
``sqlite3.IntegrityError``: a constraint a unit of work broke is the unit's own
error, and its caller handles it.

Some reasons are **transient**: the database may take the same write a moment
later (PostgreSQL restarting or failing over, a backend terminated, SQLite's
lock held by another process, a full disk or a read-only file someone fixes).
A running turn rides those out, under a deadline (``store.outage_seconds``,
daemon/ledger/journal.py); the others (``corrupt``, ``storage_error``, ``closed``)
will not heal by waiting.
"""

from __future__ import annotations

import sqlite3

__all__ = ["StorageError", "TRANSIENT", "is_busy", "translate"]

#: reasons a later attempt may succeed at: worth retrying under a deadline
TRANSIENT = frozenset({"database_unreachable", "database_locked", "disk_full", "read_only"})


class StorageError(Exception):
    """SQLite failed (disk full, locked past the timeout, read-only, corrupt).

    ``reason`` is a short snake_case word, ``detail`` the driver's message.
    """

    def __init__(self, detail: str, reason: str = "storage_error", *,
                 ambiguous: bool = False) -> None:
        super().__init__(detail)
        self.detail = detail
        self.reason = reason
        #: the failure hit a COMMIT whose outcome could not be learnt: the write may
        #: have been stored (only a retry that is idempotent may follow)
        self.ambiguous = ambiguous

    @property
    def transient(self) -> bool:
        """Whether the same write may succeed later (see TRANSIENT)."""
        return self.reason in TRANSIENT


def translate(exc: BaseException) -> BaseException:
    """Map the drivers' failures to StorageError; leave the unit's own errors alone
    (a broken constraint is ``sqlite3.IntegrityError`` on both backends)."""
    if isinstance(exc, sqlite3.IntegrityError):
        return exc
    if isinstance(exc, sqlite3.Error):
        msg = str(exc)
        if "locked" in msg or "busy" in msg:
            reason = "database_locked"
        elif "full" in msg:
            reason = "disk_full"
        elif "readonly" in msg or "read-only" in msg:
            reason = "read_only"
        elif "malformed" in msg or "not a database" in msg:
            reason = "corrupt"
        else:
            reason = "storage_error"
        return StorageError(msg, reason)
    if type(exc).__module__.startswith("psycopg"):
        return _from_postgresql(exc)
    return exc


#: SQLSTATE classes and codes of PostgreSQL's failures, by the store's reason
_PG_REASONS = {"53100": "disk_full", "25006": "read_only", "40P01": "database_locked",
               "40001": "database_locked", "55P03": "database_locked", "57014": "database_locked",
               "XX001": "corrupt", "XX002": "corrupt"}


def _from_postgresql(exc: BaseException) -> BaseException:
    """psycopg's failures (matched by SQLSTATE, so this module needs no driver)."""
    state = getattr(exc, "sqlstate", None)
    if state is not None and state.startswith("23"):
        return sqlite3.IntegrityError(str(exc))  # the unit's own error, as on SQLite
    client_side = {c.__name__ for c in type(exc).__mro__} & {"DataError", "ProgrammingError",
                                                              "NotSupportedError"}
    if state is None and client_side:
        # refused by the driver before anything was sent (a NUL byte in a text, say):
        # the same statement will never succeed
        reason = "storage_error"
    elif state is None or state.startswith("08") or state.startswith("57P"):
        # no SQLSTATE: the connection itself failed (the server is down or restarting)
        reason = "database_unreachable"
    else:
        reason = _PG_REASONS.get(state, "storage_error")
    return StorageError(str(exc).strip() or type(exc).__name__, reason)


def is_busy(exc: sqlite3.Error) -> bool:
    """Another connection holds the lock: worth waiting for, not a failure yet."""
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc))
