"""Turns ride out a PostgreSQL that goes away for a moment (docs/recovery.md).

Each test runs its own PostgreSQL server (pgstore.private_server) so that it may
restart it, or cut every connection to it, while owners run turns on it; the
shared server other test runs use is never touched. What is checked is the
outcome, never a timing: every acknowledged prompt ends ``completed`` (none
failed, none lost), each reached the model exactly once (none ran twice), and
each session's event log is gap-free with one ``message.start`` and one
``message.complete`` per admission.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pgstore
import pytest
from fakeprovider import FakeProvider, prompt_of, text_reply
from harness import OwnerProcess, Peer, clean_env, until, write_config


@pytest.fixture(scope="module")
def server() -> Iterator[pgstore.PrivateServer]:
    with pgstore.private_server() as server:
        yield server


@pytest.fixture
def url(server: pgstore.PrivateServer) -> Iterator[str]:
    """A fresh schema on the private server."""
    import psycopg

    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
        conn.execute("CREATE SCHEMA public")
    yield server.url


def slow_model(seconds: float) -> Any:
    """A model that takes ``seconds`` to answer each prompt (its own thread per request)."""

    def answer(req: dict) -> Any:
        time.sleep(seconds)
        return text_reply(f"answer to {prompt_of(req)}")

    return answer


def start_node(tmp_path: Path, name: str, provider_url: str, url: str) -> OwnerProcess:
    home = tmp_path / name
    # what is checked is that a blink fails no turn, not how fast a loaded machine
    # recovers from it: the deadline (store.outage_seconds, tested on SQLite in
    # tests/e2e/test_storage_faults.py) is kept out of the way
    write_config(home, provider_url, store={"outage_seconds": 120})
    return OwnerProcess(home, env=clean_env(home, TETHER_STORE=url))


async def submit(peer: Peer, sid: str, input_id: str) -> str:
    """prompt.submit, resubmitting by input_id while the store refuses it (as a client
    is told to: docs/recovery.md); the admission_id."""
    deadline = time.monotonic() + 60
    while True:
        reply = await peer.call("prompt.submit", session_id=sid, input_id=input_id,
                                text=input_id)
        if "result" in reply:
            return str(reply["result"]["admission_id"])
        assert reply["error"]["message"] == "storage_unavailable", reply
        assert time.monotonic() < deadline, reply
        await asyncio.sleep(0.1)


async def receipt(peer: Peer, sid: str, aid: str) -> dict[str, Any]:
    """The admission's terminal receipt, asking again while the store refuses reads."""
    deadline = time.monotonic() + 120
    while True:
        reply = await peer.call("prompt.receipt", session_id=sid, admission_id=aid)
        if "result" in reply and reply["result"]["status"] == "terminal":
            return dict(reply["result"])
        assert time.monotonic() < deadline, reply
        await asyncio.sleep(0.1)


async def check_all(peers: dict[str, Peer], work: dict[str, tuple[str, str, str]],
                    fake: FakeProvider) -> None:
    """``work``: input_id → (node, session, admission). Every one completed, once."""
    for input_id, (node, sid, aid) in work.items():
        done = await receipt(peers[node], sid, aid)
        assert done["outcome"] == "completed", (input_id, done)
        assert done["result"]["text"] == f"answer to {input_id}"
    asked = Counter(prompt_of(r) for r in fake.requests)
    assert {p: asked[p] for p in work} == dict.fromkeys(work, 1)  # none ran twice
    sessions = {(node, sid) for node, sid, _ in work.values()}
    for node, sid in sessions:
        events = await peers[node].all_events(sid)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        mine = [aid for n, s, aid in work.values() if s == sid]
        for kind in ("message.start", "message.complete"):
            seen = Counter(e["admission_id"] for e in events if e["type"] == kind)
            assert seen == Counter(mine), (kind, sid)


def ledger(url: str) -> Counter[str]:
    return Counter(r[0] for r in pgstore.rows(url, "SELECT request_id FROM session_admissions"))


async def test_a_postgresql_restart_fails_no_turn_on_two_nodes(tmp_path, server, url):
    with FakeProvider(slow_model(0.3)) as fake, \
            start_node(tmp_path, "a", fake.url, url) as a, \
            start_node(tmp_path, "b", fake.url, url) as b:
        async with await Peer.connect(a.home) as pa, await Peer.connect(b.home) as pb:
            peers = {"a": pa, "b": pb}
            work: dict[str, tuple[str, str, str]] = {}
            for node, peer in peers.items():
                for s in range(3):
                    sid = (await peer.result("session.create"))["session_id"]
                    for i in range(3):  # queued behind each other: turns run all along
                        input_id = f"{node}{s}-{i}"
                        work[input_id] = (node, sid, await submit(peer, sid, input_id))
            # turns are running on both nodes when the server goes away
            await until(lambda: len(fake.requests) >= 4, "turns to reach the model")
            await asyncio.to_thread(server.restart, 1.5)
            await check_all(peers, work, fake)
    assert ledger(url) == Counter(dict.fromkeys(work, 1))  # none lost, none doubled


class Terminator:
    """Cuts every client connection to the private server, over and over, until stopped."""

    def __init__(self, url: str, every: float, at_most: float = 10.0) -> None:
        self.url = url
        self.every = every
        self.until = time.monotonic() + at_most  # a burst, not an outage
        self.cut = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set() and time.monotonic() < self.until:
            try:
                done = pgstore.rows(self.url, "SELECT pg_terminate_backend(pid) FROM "
                                              "pg_stat_activity WHERE backend_type = 'client "
                                              "backend' AND pid != pg_backend_pid()")
                self.cut += sum(1 for (ok,) in done if ok)
            except Exception:  # noqa: BLE001 - the server may be busy: try again
                pass
            self._stop.wait(self.every)

    def __enter__(self) -> Terminator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


async def test_terminated_backends_during_a_burst_fail_no_turn(tmp_path, url):
    with FakeProvider(slow_model(0.05)) as fake, \
            start_node(tmp_path, "a", fake.url, url) as a:
        async with await Peer.connect(a.home) as pa:
            work: dict[str, tuple[str, str, str]] = {}
            sids = [(await pa.result("session.create"))["session_id"] for _ in range(6)]
            with Terminator(url, every=0.2) as killer:
                for i in range(5):
                    for s, sid in enumerate(sids):
                        input_id = f"p{s}-{i}"
                        work[input_id] = ("a", sid, await submit(pa, sid, input_id))
                await until(lambda: len(fake.requests) >= 15, "half the turns to run",
                            timeout=60)
                cut = killer.cut
            await check_all({"a": pa}, work, fake)
    assert cut >= 3  # the burst did meet cut connections
    assert ledger(url) == Counter(dict.fromkeys(work, 1))
