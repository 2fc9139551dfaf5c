"""`tether bench --store` in its tiny mode, on the local PostgreSQL: one node and three
on a private schema. The report has every figure, positive where it counts work;
every admission the clients made is a row; the schema is gone afterwards. Events
from another node are either measured or reported as not delivered, never a
figure without them. No timing thresholds."""

import subprocess
import sys

import orjson
import pgstore

LAYOUTS = ("one_node", "three_nodes")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def test_quick_postgresql_bench_measures_one_node_and_three(tmp_path):
    pgstore.require()
    root = tmp_path / "nodes"
    proc = subprocess.run(
        [sys.executable, "-m", "tether.bench", "--quick", "--json", "--home", str(root),
         "--store", pgstore.BASE_URL], capture_output=True, timeout=240,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    data = orjson.loads(proc.stdout.decode().strip().splitlines()[-1])

    assert data["store"]["nodes"] == 3 and data["store"]["schema"].startswith("bench_")
    assert data["submit"]["p50_us"] > 0 and data["retry"]["p50_us"] > 0
    adm = data["admissions"]
    assert adm["n"] == 6 * (8 // 2) * 2  # clients x per round x rounds (quick sizes)
    assert adm["pg_sequential_commits_per_s"] > 0 and adm["pg_sequential_client_us_each"] > 0
    server_cpu: list[int] = []
    for layout in LAYOUTS:
        figures = adm[layout]
        assert figures["rows"] == adm["n"], (layout, figures)  # every receipt is a row
        assert figures["per_s"] > 0 and figures["db_rows_each"] > 0
        # an admission is at least the receipt check and its write (store/pg/db.py counts)
        assert figures["round_trips_each"] >= 1, (layout, figures)
        assert figures["cpu_us_each"]["nodes"] > 0 and figures["cpu_us_each"]["clients"] > 0
        turns = data["turns"][layout]
        assert turns["n"] == 6 * 3 and turns["per_s"] > 0 and turns["db_rows_each"] > 0
        for section in (figures, turns):
            assert _number(section["db_commits_per_s"]) and section["db_commits_per_s"] >= 0
            assert len(section["cores"]["nodes"]) == 3
            if data["store"]["local"]:  # the server's processes are visible here
                # (in /proc's ticks of 10 ms: the 24 quick commits may take less)
                assert adm["pg_sequential_server_us_each"] >= 0
                server_cpu.append(section["cpu_us_each"]["postgres"])
                assert section["cpu_us_each"]["postgres_all"] >= \
                    section["cpu_us_each"]["postgres"]
    # in /proc's ticks of 10 ms one quick section may show none; all four together do
    assert not data["store"]["local"] or sum(server_cpu) > 0, server_cpu
    # the idle nodes do almost nothing; spread, every node works
    assert adm["one_node"]["cores"]["nodes"][0] > max(adm["one_node"]["cores"]["nodes"][1:])
    assert all(c > 0 for c in adm["three_nodes"]["cores"]["nodes"])

    x = data["cross_node"]
    assert x["events"] > 0
    assert x["same_node"]["received"] == x["events"] and x["same_node"]["lost"] == 0
    assert x["same_node"]["p99_ms"] > 0
    other = x["other_node"]
    assert other["available"] == (other["received"] > 0)
    if other["available"]:
        assert other["lost"] == 0 and other["p50_ms"] > 0
    else:  # no feed between nodes: said so, with no figure
        assert other["p50_ms"] is None and other["p99_ms"] is None
        assert "not delivered" in other["reason"]
    assert len(data["owner_rss_mib"]) == 3

    # nothing left behind: the schema is dropped, the nodes are gone
    assert pgstore.rows(pgstore.BASE_URL, "SELECT 1 FROM information_schema.schemata "
                        "WHERE schema_name = ?", data["store"]["schema"]) == []
    for node in "abc":
        assert not (root / f"node-{node}" / "daemon.sock").exists()


def test_store_must_be_a_postgresql_url(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tether.bench", "--quick", "--store",
         f"sqlite:///{tmp_path}/x.db"], capture_output=True, timeout=60,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert b"not a postgresql:// URL" in proc.stderr
