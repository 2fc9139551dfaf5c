"""SQLite, the default store: ``db`` (``Database``: the one writer, group-committed,
and the readers, each on a thread of the store's own) and ``migrations`` (the
schema and its versions).

May import: the store's shared core (``conn``, ``errors``, ``group_commit``,
``worker``).
"""
