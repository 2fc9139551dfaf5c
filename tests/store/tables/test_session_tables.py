"""Deleting a session reaches every table that names one: a table added later with a
session column must be added to store/session_admin.py's list (or be history on
purpose, as cron runs are)."""

from __future__ import annotations

import re
import sqlite3

from tether.store.pg import schema as pg_schema
from tether.store.sqlite.migrations import migrate
from tether.store.tables.session_admin import _CHILD_TABLES, _PG_CHILD_TABLES

#: tables that keep a session's id on purpose after it is deleted
HISTORY = {("cron_runs", "session_id")}


def session_columns_sqlite() -> set[tuple[str, str]]:
    db = sqlite3.connect(":memory:")
    migrate(db)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {(t, c[1]) for t in tables for c in db.execute(f"PRAGMA table_info({t})")
            if c[1].endswith("session_id") and t != "sessions"}


def session_columns_pg() -> set[tuple[str, str]]:
    found = set()
    for sql in pg_schema.PG_MIGRATIONS:
        for m in re.finditer(r"CREATE TABLE (\w+) \((.*?)\n\)", sql, re.S):
            for line in m.group(2).splitlines():
                col = line.split()[0] if line.split() else ""
                if col.endswith("session_id") and m.group(1) != "sessions":
                    found.add((m.group(1), col))
    return found


def test_every_session_column_is_deleted_or_kept_on_purpose():
    covered = set(_CHILD_TABLES) | HISTORY
    assert session_columns_sqlite() - covered == set()
    # session_leases go by ON DELETE CASCADE
    pg_covered = covered | set(_PG_CHILD_TABLES) | {("session_leases", "session_id")}
    assert session_columns_pg() - pg_covered == set()
    assert ("approvals", "session_id") in session_columns_pg()  # the parse finds tables
