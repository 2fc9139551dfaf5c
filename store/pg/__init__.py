"""PostgreSQL, the store of a fleet: ``db`` (``PgDatabase``, with ``Database``'s
interface), ``writer`` (its part of the group commit: a group's statements in
psycopg's pipeline), ``connection`` (the adapter a query sees, which counts the
round trips) and ``schema`` (the schema rendered for PostgreSQL, and its
migration), ``suspend`` (a group's units waiting for the server without
blocking the loop).

May import: the store's shared core (``conn``, ``errors``, ``group_commit``,
``worker``), psycopg and greenlet.
"""

from .connection import PgConn, round_trips, row_factory
from .db import PgDatabase

__all__ = ["PgConn", "PgDatabase", "round_trips", "row_factory"]
