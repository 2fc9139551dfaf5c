"""Several owners on one PostgreSQL database: placement, leases, fencing, recovery, cron.

Each node is a real owner process with a home of its own, all with
TETHER_STORE naming one fresh schema; clients talk to each node over its Unix
socket. Leases last 2 s here, so a dead node is noticed within a few seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pgstore
import pytest
from fakeprovider import FakeProvider, Reply, is_child, prompt_of, text_reply, tool_call_reply
from harness import OwnerProcess, Peer, clean_env, until, write_config

from tether.daemon.delegation.tasks import RESULTS_PREFIX

LEASE = 2


@pytest.fixture
def url() -> Iterator[str]:
    with pgstore.fresh_schema() as url:
        yield url


class Nodes:
    """Owner processes on one schema, each in its own home."""

    def __init__(self, tmp_path: Path, url: str, provider_url: str, **config: Any) -> None:
        self.tmp_path, self.url, self.provider_url, self.config = tmp_path, url, provider_url, config
        self.procs: list[OwnerProcess] = []

    def start(self, name: str) -> OwnerProcess:
        home = self.tmp_path / name
        write_config(home, self.provider_url, store={"lease_seconds": LEASE}, **self.config)
        proc = OwnerProcess(home, env=clean_env(home, TETHER_STORE=self.url)).start()
        self.procs.append(proc)
        return proc

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return pgstore.rows(self.url, sql, *args)

    def close(self) -> None:
        for proc in self.procs:
            if proc.proc is not None and proc.alive:
                os.kill(proc.proc.pid, signal.SIGCONT)  # a frozen one must hear SIGTERM
                proc.stop()
            proc.kill()


def admissions(nodes: Nodes, sid: str) -> list[tuple[Any, ...]]:
    return nodes.rows("SELECT request_id, status, outcome, owner_epoch FROM session_admissions "
                      "WHERE target_session_id = ? ORDER BY seq", sid)


def epoch_of(proc: OwnerProcess) -> int:
    return int(proc.descriptor["epoch"])


class Gate:
    """A model that answers ``HOLD`` prompts only once ``open`` is set, and counts
    the requests it saw per prompt."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, req: dict) -> Reply:
        text = prompt_of(req)
        with self._lock:
            self.seen[text] = self.seen.get(text, 0) + 1
        if text.startswith("HOLD"):
            self.open.wait(30)
        return text_reply("DONE " + text)


async def test_the_same_input_id_on_three_nodes_at_once_is_one_admission_and_one_inference(
        tmp_path, url):
    model = Gate()
    with FakeProvider(model) as fake:
        nodes = Nodes(tmp_path, url, fake.url)
        try:
            a, b, c = (nodes.start(n) for n in "abc")
            peers = [await Peer.connect(p.home) for p in (a, b, c)]
            sid = (await peers[0].result("session.create"))["session_id"]
            receipts = await asyncio.gather(*(
                p.result("prompt.submit", session_id=sid, input_id="once", text="hello")
                for p in peers))
            assert len({r["admission_id"] for r in receipts}) == 1, receipts
            final = await peers[2].wait_terminal(sid, receipts[0]["admission_id"])
            assert final["outcome"] == "completed"
            assert [r[:3] for r in admissions(nodes, sid)] == [("once", "terminal", "completed")]
            await asyncio.sleep(0.5)  # nothing else starts it a second time
            assert model.seen == {"hello": 1}
            for p in peers:
                await p.close()
        finally:
            nodes.close()


async def test_a_prompt_sent_to_another_node_runs_on_the_session_holder(tmp_path, url):
    """A session busy on A gets a second prompt through B: it queues behind the
    first and runs on A, once, in order."""
    model = Gate()
    with FakeProvider(model) as fake:
        nodes = Nodes(tmp_path, url, fake.url)
        try:
            a, b = nodes.start("a"), nodes.start("b")
            async with await Peer.connect(a.home) as pa, await Peer.connect(b.home) as pb:
                sid = (await pa.result("session.create"))["session_id"]
                first = await pa.result("prompt.submit", session_id=sid, input_id="1",
                                        text="HOLD first")
                await until(lambda: model.seen.get("HOLD first"), what="the first turn")
                second = await pb.result("prompt.submit", session_id=sid, input_id="2",
                                         text="second")
                assert second["status"] == "queued"
                # the holder, A, adopts it and says so: its queue, behind the running turn
                info = await pa.wait_event(
                    lambda e: e["type"] == "session.info"
                    and second["admission_id"] in e["payload"]["pending"])
                assert info["payload"]["running"] == first["admission_id"]
                model.open.set()
                done = await pb.wait_terminal(sid, second["admission_id"])
                assert done["outcome"] == "completed"
                assert (await pa.wait_terminal(sid, first["admission_id"]))["outcome"] \
                    == "completed"
            rows = admissions(nodes, sid)
            assert [r[:3] for r in rows] == [("1", "terminal", "completed"),
                                             ("2", "terminal", "completed")]
            # both ran on the holder, A (its epoch stamped them when they started)
            assert {r[3] for r in rows} == {epoch_of(a)}
            assert model.seen == {"HOLD first": 1, "second": 1}
        finally:
            model.open.set()
            nodes.close()


async def test_kill9_of_the_running_node_another_marks_unknown_and_runs_the_queue(
        tmp_path, url):
    model = Gate()
    with FakeProvider(model) as fake:
        nodes = Nodes(tmp_path, url, fake.url)
        try:
            a, b, c = (nodes.start(n) for n in "abc")
            async with await Peer.connect(a.home) as pa:
                sid = (await pa.result("session.create"))["session_id"]
                await pa.result("prompt.submit", session_id=sid, input_id="1", text="HOLD one")
                await until(lambda: model.seen.get("HOLD one"), what="the turn on A")
                await pa.result("prompt.submit", session_id=sid, input_id="2", text="two")
            killed_at = time.monotonic()
            a.kill()
            async with await Peer.connect(b.home) as pb:
                await until(lambda: admissions(nodes, sid)[0][1] == "unknown", timeout=20,
                            what="B or C to recover A's turn")
                # not before A's lease ran out (renewed every third of it until the kill)
                assert time.monotonic() - killed_at >= LEASE * 2 / 3 - 0.1
                # the session is paused behind the unknown turn, as after a restart;
                # settling it (through B) lets its queue run on the node holding it now
                [one, two] = [r[0] for r in nodes.rows(
                    "SELECT admission_id FROM session_admissions WHERE target_session_id = ? "
                    "ORDER BY seq", sid)]
                await pb.result("prompt.resolve_unknown", session_id=sid, admission_id=one)
                done = await pb.wait_terminal(sid, two)
            assert done["outcome"] == "completed" and done["result"]["text"] == "DONE two"
            rows = admissions(nodes, sid)
            assert [r[:2] for r in rows] == [("1", "terminal"), ("2", "terminal")]
            assert rows[1][3] in (epoch_of(b), epoch_of(c))  # on a live node, once
            assert model.seen == {"HOLD one": 1, "two": 1}  # the unknown turn never ran again
            assert nodes.rows("SELECT state FROM nodes WHERE epoch = ?", epoch_of(a)) \
                == [("dead",)]
        finally:
            model.open.set()
            nodes.close()


async def test_a_node_frozen_past_its_lease_cannot_write_over_its_successor(tmp_path, url):
    model = Gate()
    with FakeProvider(model) as fake:
        nodes = Nodes(tmp_path, url, fake.url)
        try:
            a = nodes.start("a")
            nodes.start("b")
            async with await Peer.connect(a.home) as pa:
                sid = (await pa.result("session.create"))["session_id"]
                receipt = await pa.result("prompt.submit", session_id=sid, input_id="1",
                                          text="HOLD frozen")
                await until(lambda: model.seen.get("HOLD frozen"), what="the turn on A")
            assert a.proc is not None
            os.kill(a.proc.pid, signal.SIGSTOP)
            await until(lambda: admissions(nodes, sid)[0][1] == "unknown", timeout=20,
                        what="B or C to take over from the frozen A")
            taken = nodes.rows("SELECT MAX(seq) FROM events WHERE session_id = ?", sid)[0][0]
            model.open.set()  # A's model answer is waiting for it when it wakes
            os.kill(a.proc.pid, signal.SIGCONT)
            # A learns it was declared dead and stops; nothing it had is written
            await until(lambda: not a.alive, timeout=20, what="A to stop")
            await asyncio.sleep(0.5)
            assert admissions(nodes, sid) == [("1", "unknown", None, epoch_of(a))]
            after = nodes.rows("SELECT type FROM events WHERE session_id = ? AND seq > ?",
                               sid, taken)
            assert after == [], after  # not a delta, not an outcome
            final = pgstore.rows(url, "SELECT status FROM session_admissions "
                                      "WHERE admission_id = ?", receipt["admission_id"])
            assert final == [("unknown",)]
        finally:
            model.open.set()
            nodes.close()


class Fanout:
    """A parent that delegates two tasks in the background; child BETA waits for
    ``release``; a delivered result is acknowledged (and counted)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.deliveries = 0
        self._lock = threading.Lock()

    def __call__(self, req: dict) -> Reply:
        said = prompt_of(req)
        if is_child(req):
            if "BETA" in said:
                self.release.wait(30)
            return text_reply("BETA_DONE" if "BETA" in said else "ALPHA_DONE")
        if req["messages"][-1]["role"] == "tool":
            return text_reply("DISPATCHED")
        if said.startswith(RESULTS_PREFIX):
            with self._lock:
                self.deliveries += 1
            return text_reply("GOT RESULTS")
        return tool_call_reply("delegate_task", {"tasks": [{"goal": "do ALPHA"},
                                                           {"goal": "do BETA"}]})


async def test_a_dead_nodes_background_delegation_is_delivered_once_by_another(tmp_path, url):
    model = Fanout()
    with FakeProvider(model) as fake:
        nodes = Nodes(tmp_path, url, fake.url)
        try:
            a, b, c = (nodes.start(n) for n in "abc")
            async with await Peer.connect(a.home) as pa:
                sid = (await pa.result("session.create"))["session_id"]
                r = await pa.result("prompt.submit", session_id=sid, input_id="bg", text="go")
                assert (await pa.wait_terminal(sid, r["admission_id"]))["result"]["text"] \
                    == "DISPATCHED"
                await until(lambda: nodes.rows("SELECT state FROM async_delegations")
                            == [("running",)], what="the background delegation")
            a.kill()
            await until(lambda: nodes.rows("SELECT state, delivery_state FROM async_delegations")
                        == [("interrupted", "delivered")], timeout=20,
                        what="the interrupted delegation's delivery")
            async with await Peer.connect(b.home) as pb:
                [(delivery,)] = nodes.rows(
                    "SELECT admission_id FROM session_admissions WHERE target_session_id = ? "
                    "AND principal_id = 'delegation'", sid)
                done = await pb.wait_terminal(sid, delivery)
            assert done["result"]["text"] == "GOT RESULTS"
            await asyncio.sleep(1.0)  # B and C both ran recovery passes meanwhile
            assert model.deliveries == 1
            [(result_json,)] = nodes.rows("SELECT result_json FROM async_delegations")
            statuses = {r["status"] for r in json.loads(result_json)["results"]}
            assert "interrupted" in statuses
        finally:
            model.release.set()
            nodes.close()


async def test_cron_fires_once_per_scheduled_time_with_three_nodes(tmp_path, url):
    with FakeProvider(lambda req: text_reply("TICK")) as fake:
        nodes = Nodes(tmp_path, url, fake.url)
        try:
            a = nodes.start("a")
            async with await Peer.connect(a.home) as pa:
                await pa.result("cron.create", name="tick", schedule="every 1s",
                                prompt="tick", grace_seconds=0)
            nodes.start("b"), nodes.start("c")
            await until(lambda: len(nodes.rows(
                "SELECT 1 FROM cron_runs WHERE status = 'admitted'")) >= 5, timeout=30,
                what="five fires")
            async with await Peer.connect(a.home) as pa:
                await pa.result("cron.pause", name="tick")
            await asyncio.sleep(1.0)
            runs = nodes.rows("SELECT scheduled_for, status, admission_id FROM cron_runs "
                              "ORDER BY scheduled_for")
            times = [r[0] for r in runs]
            assert len(times) == len(set(times)), "a scheduled time fired twice"
            admitted = [r for r in runs if r[1] == "admitted"]
            [(n_admissions,)] = nodes.rows(
                "SELECT COUNT(*) FROM session_admissions WHERE principal_id = 'cron'")
            assert n_admissions == len(admitted)
        finally:
            nodes.close()


def status(url: str, *args: str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "tether.clients.cli", "status", "--store", url,
                           *args], capture_output=True, text=True, timeout=30,
                          env=clean_env(Path("/nonexistent")))
    return proc.returncode, proc.stdout + proc.stderr


async def test_status_lists_the_nodes_with_their_leases(tmp_path, url):
    model = Gate()
    with FakeProvider(model) as fake:
        nodes = Nodes(tmp_path, url, fake.url)
        try:
            a, b = nodes.start("a"), nodes.start("b")
            async with await Peer.connect(a.home) as pa:
                sid = (await pa.result("session.create"))["session_id"]
                await pa.result("prompt.submit", session_id=sid, input_id="1", text="HOLD s")
                await until(lambda: model.seen.get("HOLD s"), what="the turn on A")
                code, out = status(url, "--json")
                assert code == 0, out
                listed = {n["epoch"]: n for n in json.loads(out)["nodes"]}
                assert set(listed) == {epoch_of(a), epoch_of(b)}
                assert listed[epoch_of(a)]["leases"] == 1 and listed[epoch_of(b)]["leases"] == 0
                assert all(n["alive"] and n["state"] == "serving" for n in listed.values())
                model.open.set()
            assert b.stop() == 0
            code, out = status(url)
            assert code == 0 and "1 node(s) alive of 2 known" in out, out
            assert out.count("stopped") == 1 and out.count("serving") == 1, out
            assert a.stop() == 0
            code, out = status(url)
            assert code == 3 and "0 node(s) alive" in out, out
        finally:
            model.open.set()
            nodes.close()


def test_status_of_a_database_without_a_fleet_says_so(url):
    code, out = status(url)
    assert code == 3 and "no tether fleet" in out and "tether serve --store" in out, out


async def test_a_turn_is_stopped_and_a_queued_prompt_withdrawn_through_another_node(
        tmp_path, url):
    model = Gate()
    with FakeProvider(model) as fake:
        nodes = Nodes(tmp_path, url, fake.url)
        try:
            a, b = nodes.start("a"), nodes.start("b")
            async with await Peer.connect(a.home) as pa, await Peer.connect(b.home) as pb:
                sid = (await pa.result("session.create"))["session_id"]
                first = await pa.result("prompt.submit", session_id=sid, input_id="1",
                                        text="HOLD long")
                queued = await pa.result("prompt.submit", session_id=sid, input_id="2",
                                         text="later")
                await until(lambda: model.seen.get("HOLD long"), what="the turn on A")
                # a queued prompt of A's queue, cancelled through B: withdrawn, never run
                withdrawn = await pb.result("prompt.cancel", session_id=sid,
                                            admission_id=queued["admission_id"])
                assert (withdrawn["status"], withdrawn["outcome"]) == ("terminal", "cancelled")
                # the running turn, interrupted through B: A stops it
                stopped = await pb.result("session.interrupt", session_id=sid)
                assert stopped == {"interrupted": True, "admission_id": first["admission_id"]}
                done = await pb.wait_terminal(sid, first["admission_id"])
                assert done["outcome"] == "cancelled"
                # nothing runs any more: a third prompt, through B, runs next (on A or B)
                third = await pb.result("prompt.submit", session_id=sid, input_id="3",
                                        text="after")
                assert (await pb.wait_terminal(sid, third["admission_id"]))["outcome"] \
                    == "completed"
            assert "later" not in model.seen
            assert nodes.rows("SELECT COUNT(*) FROM turn_stops") == [(0,)]
        finally:
            model.open.set()
            nodes.close()
