"""`tether bench` in its tiny mode: the report has every figure, the right types,
and fan-out lost nothing. No timing thresholds: the bench measures, CI judges nothing.
The PostgreSQL bench (``--store``): tests/daemon/test_bench_fleet.py."""

import os
import subprocess
import sys

import orjson

NUMBERS = {
    "ping": ("p50_us", "p99_us", "baseline_p50_us", "ratio"),
    "submit": ("p50_us", "p99_us"),
    "retry": ("p50_us", "p99_us"),
    "admissions_per_s": ("tether", "sqlite_baseline", "ratio", "echo_floor",
                         "owner_cpu_us_each", "clients_cpu_us_each"),
    "fanout": ("viewers", "events", "p99_ms", "lost"),
    "oneshot_ms": ("p50", "python_floor_ms", "ratio"),
    "http_turns": ("per_s", "owner_cpu_us_each", "model_server_cpu_us_each", "n"),
}


def test_quick_bench_reports_every_figure(tmp_path):
    home = tmp_path / "bench-home"
    # the bench's owner keeps state.db in its home whatever the environment names
    env = {**os.environ, "TETHER_STORE": "postgresql://127.0.0.1:1/nowhere"}
    proc = subprocess.run(
        [sys.executable, "-m", "tether.bench", "--quick", "--json", "--home", str(home)],
        capture_output=True, timeout=180, stdin=subprocess.DEVNULL, env=env)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    data = orjson.loads(proc.stdout.decode().strip().splitlines()[-1])
    for section, keys in NUMBERS.items():
        for key in keys:
            value = data[section][key]
            assert isinstance(value, int | float) and not isinstance(value, bool), (section, key)
            assert value >= 0, (section, key, value)
    assert isinstance(data["turns_per_s"], int | float) and data["turns_per_s"] > 0
    # every turn against the model server completed (the phase fails otherwise), and
    # the owner did work for them
    assert data["http_turns"]["n"] == 12 and data["http_turns"]["owner_cpu_us_each"] > 0
    assert isinstance(data["owner_rss_mib"], int | float) and data["owner_rss_mib"] > 0
    assert data["fanout"]["lost"] == 0
    assert data["fanout"]["events"] > 0 and data["fanout"]["viewers"] > 0
    assert set(data["targets"]) >= {"ping.ratio", "admissions_per_s.ratio", "fanout.p99_ms"}
    # the private owner is gone and took its socket and descriptor with it
    assert not (home / "daemon.sock").exists() and not (home / "daemon.json").exists()
    assert (home / "state.db").exists()


def test_bench_table_names_targets(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tether.bench", "--quick", "--home",
         str(tmp_path / "h")], capture_output=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    out = proc.stdout.decode()
    assert "ping.ratio" in out and "target" in out
    assert "CPU per admission: owner" in out
    assert "against a model server over HTTP" in out
    assert "PASS" in out or "FAIL" in out
