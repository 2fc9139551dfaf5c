"""``tether bench --store URL``: set up the private schema and nodes, run, clean up, print.

`run_fleet` makes the schema (pgside.py), starts the three nodes in homes of
their own (under ``--home`` or a temporary directory), runs the phases
(fleet.py), then stops the nodes and drops the schema whatever happened;
`fleet_table` prints the figures for a reader. command.py adds what every report
carries (mode, machine, date) and chooses between the table and JSON.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from .fleet import FLEET_SIZES, NODES, FleetBench
from .pgside import PgSide
from .processes import Processes, stop_all

__all__ = ["fleet_table", "run_fleet"]


def _fail(msg: str) -> None:
    print(f"tether bench: {msg}", file=sys.stderr)


def run_fleet(url: str, mode: str, home: str | None,
              phases: set[str] | None) -> tuple[int, dict[str, Any] | None, Path | None]:
    """(exit status, figures, the nodes' parent directory)."""
    from tether.daemon.config.core import ConfigError
    from tether.daemon.config.store import load_store_config, shown_url

    try:
        load_store_config(None, flag=url, env={})
    except ConfigError as exc:
        _fail(str(exc))
        return 2, None, None
    try:
        import psycopg
    except ImportError as exc:
        _fail(f"--store needs the PostgreSQL driver ({exc.name} is not installed): "
              "pip install 'tether[postgresql]'")
        return 3, None, None
    pg = PgSide(url)
    try:
        pg.create()
    except psycopg.Error as exc:
        _fail(f"cannot use {shown_url(url)}: {' '.join(str(exc).split())}")
        return 3, None, None
    temp = home is None
    root = Path(tempfile.mkdtemp(prefix="tether-bench-") if temp else str(home)).absolute()
    nodes = [Processes(root / f"node-{name}", store=pg.url) for name in NODES]
    try:
        try:
            for p in nodes:
                p.home.mkdir(mode=0o700, parents=True, exist_ok=True)
                p.start_owner()
        except RuntimeError as exc:
            _fail(str(exc))
            return 3, None, root
        data = asyncio.run(FleetBench(nodes, pg, FLEET_SIZES[mode]).run(phases))
        data["store"] = {**pg.describe(), "url": shown_url(url), "nodes": len(nodes)}
    except (OSError, RuntimeError, psycopg.Error) as exc:
        _fail(f"failed: {exc}")
        return 1, None, root
    finally:
        stop_all(nodes)
        try:
            pg.drop()
        except psycopg.Error as exc:
            _fail(f"could not drop schema {pg.schema}: {exc}")
        if temp:
            shutil.rmtree(root, ignore_errors=True)
    return 0, data, root


def _layout(name: str, f: dict[str, Any], unit: str) -> str:
    cpu, cores = f["cpu_us_each"], f["cores"]
    nodes = "/".join(str(c) for c in cores["nodes"])
    return (f"    {name:<12}{f['per_s']}/s; database {f['db_commits_per_s']} commits/s "
            f"({f['db_commits_each']} per {unit}), {f['round_trips_each']} round trips per "
            f"{unit}, {f['db_rows_each']} rows written and "
            f"{f['wal_bytes_each']} WAL bytes per {unit}; CPU per {unit}: nodes {cpu['nodes']} us, "
            f"postgres {cpu['postgres']} us (all of it {cpu['postgres_all']} us), "
            f"clients {cpu['clients']} us; cores busy: nodes {nodes}, postgres "
            f"{cores['postgres_all']}, clients {cores['clients']}, anything else {cores['other']}, "
            f"machine {cores['machine']}")


def fleet_table(data: dict[str, Any]) -> str:
    m, s = data["machine"], data["store"]
    lines = [f"tether bench --store ({data['mode']}, {data['seconds']} s, {m['cpus']} CPU, "
             f"Python {m['python']}; {s['server']}, schema {s['schema']}, dropped)", ""]
    if "submit" in data:
        lines.append(f"  submit      p50 {data['submit']['p50_us']} us, p99 "
                     f"{data['submit']['p99_us']} us (one client, node a); retry p50 "
                     f"{data['retry']['p50_us']} us")
    if "idle" in data:
        i = data["idle"]
        lines.append(f"  idle        {s['nodes']} nodes: {i['db_commits_per_s']} database "
                     f"commits/s, {i['round_trips_per_s']} round trips/s, "
                     f"{i['db_rows_per_s']} rows written/s, node cores "
                     f"{'/'.join(map(str, i['node_cores']))}")
    if "admissions" in data:
        a = data["admissions"]
        lines += [f"  admissions  {a['clients']} clients, {a['n']} each layout; one writer's "
                  f"sequential commits {a['pg_sequential_commits_per_s']}/s (CPU each: "
                  f"server {a['pg_sequential_server_us_each']} us, client "
                  f"{a['pg_sequential_client_us_each']} us)",
                  _layout("one node", a["one_node"], "admission"),
                  _layout("three nodes", a["three_nodes"], "admission")]
    if "turns" in data:
        t = data["turns"]
        lines += [f"  turns       {t['sessions']} sessions",
                  _layout("one node", t["one_node"], "turn"),
                  _layout("three nodes", t["three_nodes"], "turn")]
    if "cross_node" in data:
        x = data["cross_node"]
        same, other = x["same_node"], x["other_node"]
        there = (f"p50 {other['p50_ms']} ms, p99 {other['p99_ms']} ms, lost {other['lost']}"
                 if other["available"] else f"not available ({other['reason']})")
        lines.append(f"  events      {x['events']} appended on node {x['appended_on']}; viewers "
                     f"on node {x['viewed_on']}: {there}; on node {x['appended_on']}: p50 "
                     f"{same['p50_ms']} ms, p99 {same['p99_ms']} ms")
    lines.append(f"  node RSS    {'/'.join(map(str, data['owner_rss_mib']))} MiB")
    return "\n".join(lines)
