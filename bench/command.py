"""``tether bench``'s command line: the targets, the sizes, the report.

``main`` parses the bench's own flags, runs the phases (phases.py) against a
private owner (processes.py) and prints the figures: a table with the targets,
or with ``--json`` one JSON object as the last line of stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from .phases import Bench
from .processes import Processes
from .servers import serve_echo_process, serve_owner

__all__ = ["SIZES", "TARGETS", "judge", "main"]

#: (key path, comparison, limit): this round's targets (docs/performance.md)
TARGETS: list[tuple[str, str, float]] = [
    ("ping.ratio", "<=", 2.0),
    ("submit.p50_us", "<=", 3000.0),
    ("retry.p50_us", "<=", 1500.0),
    ("admissions_per_s.ratio", ">=", 1.0),
    ("turns_per_s", ">=", 500.0),
    ("fanout.lost", "<=", 0),
    ("fanout.p99_ms", "<=", 50.0),
    ("oneshot_ms.ratio", "<=", 4.0),  # issue 21: a one-shot starts like a small tool
    ("owner_rss_mib", "<=", 80.0),
]

#: iterations per mode; the client counts (64, 100) are part of what is measured
SIZES: dict[str, dict[str, int]] = {
    "quick": dict(ping=200, ping_block=50, submit=60, retry=60, adm_clients=8, adm_each=10,
                  adm_rounds=2, turn_sessions=8, turn_each=3, viewers=4, events=120,
                  oneshot=1, floor=2, long_turns=100, fanout_runs=2,
                  http_sessions=4, http_each=3),
    "default": dict(ping=4000, ping_block=250, submit=1500, retry=1500, adm_clients=64,
                    adm_each=45, adm_rounds=3, turn_sessions=64, turn_each=16, viewers=100,
                    events=2000, oneshot=8, floor=8, long_turns=1000, fanout_runs=5,
                    http_sessions=16, http_each=25),
    "long": dict(ping=20000, ping_block=500, submit=6000, retry=6000, adm_clients=64,
                 adm_each=240, adm_rounds=6, turn_sessions=64, turn_each=60, viewers=100,
                 events=10000, oneshot=25, floor=25, long_turns=5000, fanout_runs=11,
                 http_sessions=16, http_each=45),
}


# -- report ---------------------------------------------------------------


def _get(data: dict[str, Any], path: str) -> Any:
    value: Any = data
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def judge(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target with the measured value and whether it holds (None: not measured)."""
    out = {}
    for path, op, limit in TARGETS:
        value = _get(data, path)
        ok = None if value is None else (value <= limit if op == "<=" else value >= limit)
        out[path] = {"value": value, "target": f"{op} {limit:g}", "ok": ok}
    return out


def _table(data: dict[str, Any]) -> str:
    m = data["machine"]
    lines = [f"tether bench ({data['mode']}, {data['seconds']} s, {m['cpus']} CPU, "
             f"Python {m['python']}, {m['disk']})", ""]
    for path, t in data["targets"].items():
        mark = {True: "PASS", False: "FAIL", None: "n/a "}[t["ok"]]
        lines.append(f"  {mark}  {path:<24} {t['value']!s:>12}   target {t['target']}")
    p, s, r = data["ping"], data["submit"], data["retry"]
    a, f, h = data["admissions_per_s"], data["fanout"], data["http_turns"]
    lines += ["",
              f"  ping        p50 {p['p50_us']} us, p99 {p['p99_us']} us; "
              f"echo baseline p50 {p['baseline_p50_us']} us",
              f"  submit      p50 {s['p50_us']} us, p99 {s['p99_us']} us",
              f"  retry       p50 {r['p50_us']} us, p99 {r['p99_us']} us",
              f"  admissions  {a['tether']}/s with {a['clients']} clients; "
              f"SQLite sequential commits {a['sqlite_baseline']}/s; "
              f"echo floor {a['echo_floor']}/s; CPU per admission: owner "
              f"{a['owner_cpu_us_each']} us, clients {a['clients_cpu_us_each']} us",
              f"  turns       {data['turns_per_s']}/s, owner CPU "
              f"{data['turn_owner_cpu_us_each']} us each",
              f"  HTTP turns  {h['per_s']}/s against a model server over HTTP, owner CPU "
              f"{h['owner_cpu_us_each']} us each",
              f"  fan-out     {f['events']} events x {f['viewers']} viewers: p50 {f['p50_ms']} ms, "
              f"p99 {f['p99_ms']} ms, lost {f['lost']}",
              f"  one-shot    p50 {data['oneshot_ms']['p50']} ms; python -c pass "
              f"{data['oneshot_ms']['python_floor_ms']} ms",
              f"  owner RSS   {data['owner_rss_mib']} MiB"]
    return "\n".join(lines)


def _machine(home: Path) -> dict[str, Any]:
    model = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    disk = "unknown"
    with contextlib.suppress(OSError):
        best = ""
        for line in Path("/proc/mounts").read_text().splitlines():
            device, mount, fstype = line.split()[:3]
            inside = str(home).startswith(mount.rstrip("/") + "/") or str(home) == mount
            if inside and len(mount) > len(best):
                best, disk = mount, f"{fstype} on {device} (mounted at {mount})"
    return {"cpus": os.cpu_count(), "cpu_model": model,
            "python": platform.python_version(), "platform": platform.platform(),
            "home": str(home), "disk": disk}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tether bench",
        description="Measure a private owner (instant provider) against its baselines; "
                    "with --store, one node and a fleet of three on PostgreSQL.")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object as the last line of stdout")
    parser.add_argument("--home", help="run the private owner here (default: a temporary "
                                       "directory; with --store, the nodes' homes go under "
                                       "it); must not have an owner running")
    parser.add_argument("--long", action="store_true", help="more iterations of everything")
    parser.add_argument("--store", metavar="URL",
                        help="measure on PostgreSQL (a postgresql:// URL): admissions and "
                             "turns on one node and on three, the database's share, events "
                             "across nodes. The run creates a fresh schema bench_<hex> in that "
                             "database and drops it afterwards; no other schema is read or "
                             "written. $TETHER_STORE and config.yaml are never used")
    parser.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--phases", metavar="LIST",
                        help="run only these phases (comma-separated; for profiling): ping, "
                             "submit, admissions, turns, fanout, http_turns, oneshot; "
                             "long_session and oneshot_fanout on request only; with --store: "
                             "submit, admissions, turns, cross")
    parser.add_argument("--hermes", metavar="PATH",
                        help="with the oneshot_fanout phase: also time hermes-agent's "
                             "`PATH -z` on the same fan-out prompt against the same model "
                             "server, runs alternating")
    parser.add_argument("--serve-owner", metavar="HOME", help=argparse.SUPPRESS)
    parser.add_argument("--serve-echo", metavar="SOCK", help=argparse.SUPPRESS)
    parser.add_argument("--serve-model", metavar="PORTFILE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_owner:
        return serve_owner(args.serve_owner)
    if args.serve_echo:
        return serve_echo_process(args.serve_echo)
    if args.serve_model:
        from .modelserver import serve_model_process

        return serve_model_process(args.serve_model)

    mode = "quick" if args.quick else "long" if args.long else "default"
    if args.store:
        return _main_fleet(args, mode)
    temp = args.home is None
    home = Path(tempfile.mkdtemp(prefix="tether-bench-") if temp else args.home).absolute()
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    procs = Processes(home)
    bench = Bench(procs, SIZES[mode], args.hermes)
    t0 = time.monotonic()
    try:
        try:
            procs.start_owner()
        except RuntimeError as exc:
            print(f"tether bench: {exc}", file=sys.stderr)
            return 3
        data = asyncio.run(bench.run(set(args.phases.split(",")) if args.phases else None))
    except (OSError, RuntimeError) as exc:
        print(f"tether bench: failed: {exc}", file=sys.stderr)
        return 1
    finally:
        procs.stop_echo()
        procs.stop_owner()
        if temp:
            shutil.rmtree(home, ignore_errors=True)
    data["mode"] = mode
    data["seconds"] = round(time.monotonic() - t0, 1)
    data["machine"] = _machine(home)
    data["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    data["targets"] = judge(data)
    if args.phases:
        print(orjson.dumps(data).decode())
        return 0
    data["pass"] = all(t["ok"] for t in data["targets"].values())
    if args.json:
        print(orjson.dumps(data).decode())
    else:
        print(_table(data))
    return 0


def _main_fleet(args: argparse.Namespace, mode: str) -> int:
    from .fleetcmd import fleet_table, run_fleet

    t0 = time.monotonic()
    status, data, root = run_fleet(args.store, mode, args.home,
                                   set(args.phases.split(",")) if args.phases else None)
    if data is None or root is None:
        return status
    data["mode"] = mode
    data["seconds"] = round(time.monotonic() - t0, 1)
    data["machine"] = _machine(root)
    data["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(orjson.dumps(data).decode() if args.json else fleet_table(data))
    return 0
