"""The store's one error, and how sqlite3's failures map onto it.

Every sqlite3 failure leaves the store as a `StorageError` with a short
``reason`` (``database_locked``, ``disk_full``, ``read_only``, ``corrupt``,
``storage_error``; ``closed`` from a closed `Database`), except
``sqlite3.IntegrityError``: a constraint a unit of work broke is the unit's own
error, and its caller handles it.
"""

from __future__ import annotations

import sqlite3

__all__ = ["StorageError", "is_busy", "translate"]


class StorageError(Exception):
    """SQLite failed (disk full, locked past the timeout, read-only, corrupt).

    ``reason`` is a short snake_case word, ``detail`` the driver's message.
    """

    def __init__(self, detail: str, reason: str = "storage_error") -> None:
        super().__init__(detail)
        self.detail = detail
        self.reason = reason


def translate(exc: BaseException) -> BaseException:
    """Map sqlite3 failures to StorageError; leave the unit's own errors alone."""
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
    return exc


def is_busy(exc: sqlite3.Error) -> bool:
    """Another connection holds the lock: worth waiting for, not a failure yet."""
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc))
