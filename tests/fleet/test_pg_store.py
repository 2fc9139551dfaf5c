"""The PostgreSQL store's own failures, against the real owner: a server that drops
the writer's connection, one that cannot be reached, a URL that is not one."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator

import pgstore
import pytest
from fakeprovider import FakeProvider, text_reply
from harness import OwnerProcess, Peer, clean_env, write_config


@pytest.fixture
def url() -> Iterator[str]:
    with pgstore.fresh_schema() as url:
        yield url


def terminate_writer(owner: OwnerProcess) -> int:
    """Close the owner's writer connection from the server's side, as a server
    restart or a network cut would (its application_name carries its pid)."""
    assert owner.proc is not None
    rows = pgstore.rows(pgstore.BASE_URL, "SELECT pg_terminate_backend(pid) FROM "
                                          "pg_stat_activity WHERE application_name = ?",
                        f"tether-writer {owner.proc.pid}")
    return len(rows)


async def test_a_dropped_writer_connection_loses_nothing_acknowledged(tmp_path, url):
    home = tmp_path / "home"
    with FakeProvider(lambda req: text_reply("OK")) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home, env=clean_env(home, TETHER_STORE=url)) as owner:
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create"))["session_id"]
                acknowledged: dict[str, str] = {}
                refused = 0
                for i in range(6):
                    if i % 2:  # between turns: the next write finds its connection gone
                        assert terminate_writer(owner) == 1
                    for _attempt in range(20):  # a client resubmits by input_id, as documented
                        reply = await peer.call("prompt.submit", session_id=sid,
                                                input_id=f"in-{i}", text=f"prompt {i}")
                        if "result" in reply:
                            acknowledged[f"in-{i}"] = reply["result"]["admission_id"]
                            break
                        assert reply["error"]["message"] == "storage_unavailable", reply
                        refused += 1
                        await asyncio.sleep(0.1)
                    done = await peer.wait_terminal(sid, acknowledged[f"in-{i}"])
                    assert done["outcome"] == "completed", done
                assert len(acknowledged) == 6
                # each dropped connection failed the one write that found it, and no more
                assert refused <= 3
    rows = pgstore.rows(url, "SELECT request_id, admission_id, status FROM session_admissions "
                             "ORDER BY seq")
    assert [(r[0], r[1]) for r in rows] == list(acknowledged.items())
    assert {r[2] for r in rows} == {"terminal"}
    # the event log stayed gap-free through the reconnects
    seqs = [r[0] for r in pgstore.rows(url, "SELECT seq FROM events WHERE session_id = ? "
                                            "ORDER BY seq", sid)]
    assert seqs == list(range(1, len(seqs) + 1))


def serve(home, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether.daemon", "--home", str(home), *args],
                          env=env, capture_output=True, text=True, timeout=60)


def test_an_unreachable_database_is_a_clear_refusal_to_start(tmp_path):
    home = tmp_path / "home"
    proc = serve(home, "--store", "postgresql://tether@127.0.0.1:9/nowhere?connect_timeout=2",
                 env=clean_env(home))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("tether: the store is unusable (database_unreachable):"), \
        proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (home / "state.db").exists() and not (home / "daemon.json").exists()


def test_a_store_url_that_is_not_postgresql_is_a_configuration_error(tmp_path):
    home = tmp_path / "home"
    write_config(home, store={"url": "mysql://db/x"})
    proc = serve(home, env=clean_env(home))
    assert proc.returncode == 2, proc.stderr
    assert "`store.url`" in proc.stderr and "postgresql://" in proc.stderr
    other = tmp_path / "other"
    proc = serve(other, env=clean_env(other, TETHER_STORE="sqlite:///tmp/x"))
    assert proc.returncode == 2 and "TETHER_STORE" in proc.stderr, proc.stderr
