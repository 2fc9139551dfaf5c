"""The fleet as `tether status --store URL` shows it, read straight from the database.

No node has to answer: the rows of ``nodes`` (with the leases each holds) are
what the fleet itself goes by. psycopg is imported only here.
"""

from __future__ import annotations

import time
from typing import Any

from tether.store import StorageError
from tether.store.errors import translate
from tether.store.pg import PgConn, row_factory
from tether.store.tables import fleet as fleet_rows

__all__ = ["NoFleet", "Unreadable", "read_nodes"]


class NoFleet(Exception):
    """The database holds no tether fleet (no ``nodes`` table)."""


class Unreadable(Exception):
    """The database could not be read (unreachable, refused, ...): the reason."""


def read_nodes(url: str) -> list[dict[str, Any]]:
    """Every node the fleet knows, oldest first, each with ``alive`` (serving or
    draining, and its heartbeat not run out) and ``leases`` (sessions held).
    Raises NoFleet, or Unreadable when the database cannot be read."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=5, autocommit=True,
                             row_factory=row_factory) as raw:
            nodes = fleet_rows.list_nodes(PgConn(raw))
    except psycopg.errors.UndefinedTable:
        raise NoFleet(url) from None
    except psycopg.Error as exc:
        err = translate(exc)
        detail = err.detail if isinstance(err, StorageError) else str(exc)
        raise Unreadable(" ".join(detail.split())) from None
    now = time.time()
    for n in nodes:
        n["alive"] = n["state"] in ("serving", "draining") and n["expires_at"] > now
    return nodes
