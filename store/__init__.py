"""tether.store: SQLite schema, migrations, queries and the group-commit writer.

It owns state.db: the schema and its migrations (migrations.py), the one
writer and the readers (db.py), and the queries, one module per table. It
knows nothing of the wire protocol or of the owner's rules (which statuses a
transition may start from is the caller's argument). Query modules are grouped by table and take
a ``sqlite3.Connection``; run them through ``Database.write`` / ``Database.read``.
"""

from . import admissions, delegations, events, messages, runtime, sessions
from .conn import Conn, Store
from .db import Database
from .errors import StorageError
from .migrations import SCHEMA_VERSION

__all__ = [
    "Conn", "Database", "Store", "StorageError", "SCHEMA_VERSION",
    "admissions", "delegations", "events", "messages", "runtime", "sessions",
]
