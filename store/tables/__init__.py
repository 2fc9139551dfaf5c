"""The queries, one module per table (``sessions``, ``messages``, ``admissions``,
``events``, ...). Each takes a connection (``tether.store.conn.Conn``) and runs in
a unit of the store's writer or in one of its reads; none commits, none knows
the wire or the owner's rules.

May import: ``tether.store.conn`` and ``errors``, and each other.
"""
