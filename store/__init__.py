"""tether.store: the schema, its migrations, the queries and the group-commit writer,
on SQLite (the default) and on PostgreSQL (a fleet).

- ``tables/``: the queries, one module per table. They take a connection
  (``Conn``: sqlite3's, or the PostgreSQL adapter's) and know nothing of the
  wire protocol or of the owner's rules (which statuses a transition may start
  from is the caller's argument).
- ``sqlite/``: state.db: the schema and its migrations, the one writer and the
  readers (``Database``).
- ``pg/``: the same schema rendered for PostgreSQL, the pipelined writer, the
  connection adapter that counts round trips (``PgDatabase``).
- ``group_commit.py``: the group-commit scheduler both writers share;
  ``worker.py``: the thread a writer's blocking calls run on; ``conn.py``: what
  a query may ask of a connection, in either dialect; ``errors.py``: a
  database's errors as ``StorageError``, translated once.

Run the queries through ``Database.write`` / ``Database.read`` (or a
``PgDatabase``'s); the daemon's journal does.
"""

from .conn import Conn, Store
from .errors import StorageError
from .sqlite.db import Database
from .sqlite.migrations import SCHEMA_VERSION

__all__ = ["Conn", "Database", "Store", "StorageError", "SCHEMA_VERSION"]
