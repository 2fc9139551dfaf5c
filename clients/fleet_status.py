"""``tether status --store URL``: the nodes of a fleet and the sessions each holds.

Reads the fleet's tables straight from the shared PostgreSQL database (no
node has to answer); psycopg is imported only here.
"""

from __future__ import annotations

import time
from typing import Any

from .exits import EXIT_OK, EXIT_OWNER, CliError

__all__ = ["fleet_status"]


def _ago(seconds: float) -> str:
    return f"{seconds:.1f} s ago" if seconds < 120 else f"{seconds / 60:.0f} min ago"


def fleet_status(url: str, as_json: bool) -> int:
    """Print the nodes; exit 0 when at least one is alive, 3 when none is."""
    try:
        import psycopg
    except ImportError:
        raise CliError(EXIT_OWNER, "unavailable", "reading a fleet needs the PostgreSQL "
                       "driver", "pip install 'tether[postgresql]'") from None
    from tether.store import fleet as fleet_rows
    from tether.store.pg import PgConn

    shown = _shown(url)
    try:
        with psycopg.connect(url, connect_timeout=5, autocommit=True) as raw:
            raw.row_factory = lambda cur: (lambda values: _row(cur, values))
            nodes = fleet_rows.list_nodes(PgConn(raw))
    except psycopg.errors.UndefinedTable:
        raise CliError(EXIT_OWNER, "not_running", f"no tether fleet in {shown}",
                       "`tether serve --store URL` starts its first node") from None
    except psycopg.Error as exc:
        raise CliError(EXIT_OWNER, "unreachable", f"cannot read {shown}: "
                       f"{' '.join(str(exc).split())}", "check the URL and that the database "
                       "server runs") from None
    now = time.time()
    for n in nodes:
        n["alive"] = n["state"] in ("serving", "draining") and n["expires_at"] > now
    alive = [n for n in nodes if n["alive"]]
    if as_json:
        import orjson

        print(orjson.dumps({"store": shown, "nodes": nodes}).decode())
        return EXIT_OK if alive else EXIT_OWNER
    print(f"fleet at {shown}: {len(alive)} node(s) alive of {len(nodes)} known")
    if nodes:
        print(f"  {'NODE':<22} {'EPOCH':>5}  {'STATE':<9} {'LEASES':>6}  {'HEARTBEAT':<12} "
              f"{'HOST':<16} {'PID':>7}  ADDRESS")
    for n in nodes:
        state = n["state"] if n["alive"] or n["state"] in ("stopped", "dead") else "expired"
        print(f"  {n['node_id']:<22} {n['epoch']:>5}  {state:<9} {n['leases']:>6}  "
              f"{_ago(now - n['heartbeat_at']):<12} {str(n['host'])[:16]:<16} "
              f"{n['pid'] or '-':>7}  {n['address'] or '-'}")
    return EXIT_OK if alive else EXIT_OWNER


def _row(cur: Any, values: Any) -> Any:
    from tether.store.pg import PgRow

    names = tuple(c.name for c in cur.description or ())
    return type("Row", (PgRow,), {"__slots__": (), "_names": names})(values)


def _shown(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@",
                                                                 ":***@", 1)))
