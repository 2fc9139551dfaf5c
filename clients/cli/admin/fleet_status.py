"""``tether status --store URL``: the nodes of a fleet and the sessions each holds.

Reads the fleet's tables straight from the shared PostgreSQL database through
daemon/fleet/status.py (imported only here, as is psycopg); no node has to answer.
"""

from __future__ import annotations

import time
from typing import Any

from ...library.exits import EXIT_OK, EXIT_OWNER, CliError

__all__ = ["fleet_status"]


def _ago(seconds: float) -> str:
    return f"{seconds:.1f} s ago" if seconds < 120 else f"{seconds / 60:.0f} min ago"


def _shown(url: str) -> str:
    """The URL with any password masked (as the owner logs it)."""
    from tether.daemon.config.store import shown_url

    return shown_url(url)


def _nodes(url: str) -> list[dict[str, Any]]:
    from tether.daemon.fleet.status import NoFleet, Unreadable, read_nodes

    try:
        return read_nodes(url)
    except ImportError as exc:  # psycopg is imported only when a fleet is read
        raise CliError(EXIT_OWNER, "unavailable", f"reading a fleet needs the PostgreSQL "
                       f"driver ({exc.name} is not installed)",
                       "pip install 'tether[postgresql]'") from None
    except NoFleet:
        raise CliError(EXIT_OWNER, "not_running", f"no tether fleet in {_shown(url)}",
                       "`tether serve --store URL` starts its first node") from None
    except Unreadable as exc:
        raise CliError(EXIT_OWNER, "unreachable", f"cannot read {_shown(url)}: {exc}",
                       "check the URL and that the database server runs") from None


def fleet_status(url: str, as_json: bool) -> int:
    """Print the nodes; exit 0 when at least one is alive, 3 when none is."""
    nodes = _nodes(url)
    alive = [n for n in nodes if n["alive"]]
    if as_json:
        import orjson

        print(orjson.dumps({"store": _shown(url), "nodes": nodes}).decode())
        return EXIT_OK if alive else EXIT_OWNER
    now = time.time()
    print(f"fleet at {_shown(url)}: {len(alive)} node(s) alive of {len(nodes)} known")
    if nodes:
        print(f"  {'NODE':<22} {'EPOCH':>5}  {'STATE':<9} {'LEASES':>6}  {'HEARTBEAT':<12} "
              f"{'HOST':<16} {'PID':>7}  ADDRESS")
    for n in nodes:
        state = n["state"] if n["alive"] or n["state"] in ("stopped", "dead") else "expired"
        print(f"  {n['node_id']:<22} {n['epoch']:>5}  {state:<9} {n['leases']:>6}  "
              f"{_ago(now - n['heartbeat_at']):<12} {str(n['host'])[:16]:<16} "
              f"{n['pid'] or '-':>7}  {n['address'] or '-'}")
    return EXIT_OK if alive else EXIT_OWNER
