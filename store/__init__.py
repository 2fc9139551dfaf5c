"""tether.store: SQLite schema, migrations, queries and the group-commit writer.

Knows nothing of the wire protocol. Query modules are grouped by table and take
a ``sqlite3.Connection``; run them through ``Database.write`` / ``Database.read``.
"""

from . import admissions, delegations, events, messages, runtime, sessions
from .db import Database
from .errors import StorageError
from .migrations import SCHEMA_VERSION

__all__ = [
    "Database", "StorageError", "SCHEMA_VERSION",
    "admissions", "delegations", "events", "messages", "runtime", "sessions",
]
