"""Events across nodes, with real owner processes on one PostgreSQL schema.

A viewer connected to one node must see, live and in order, every event of a
session, including those another node commits: each event once, seqs without a
gap, the same sequence the store holds and every other viewer sees; and it
keeps getting them (late, still in order) while its node cannot LISTEN.
"""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import pgstore
from fakeprovider import FakeProvider, Held, prompt_of, text_reply
from harness import OwnerProcess, Peer, until

from tether.daemon.fleet.feed import APP_NAME_PREFIX


def events_of(peer: Peer, session_id: str) -> list[dict[str, Any]]:
    """The session's events as the peer received them, in arrival order."""
    return [e for e in peer.events if e["session_id"] == session_id]


def assert_stream(received: list[dict[str, Any]], stored: list[dict[str, Any]],
                  after_seq: int) -> None:
    """``received`` is every stored event after ``after_seq``, once each, in seq order."""
    expected = [e for e in stored if e["seq"] > after_seq]
    assert [e["seq"] for e in received] == list(range(after_seq + 1, after_seq + 1 +
                                                      len(received)))
    assert received == expected


async def caught_up(peer: Peer, session_id: str, last_seq: int) -> None:
    await until(lambda: any(e["seq"] == last_seq for e in events_of(peer, session_id)),
                f"the viewer to receive seq {last_seq}", timeout=30)


async def test_a_viewer_on_one_node_sees_a_turn_run_on_another_live(start_nodes):
    gate = threading.Event()
    answer = "An answer written on node A and streamed to a viewer of node B."
    with FakeProvider(lambda req: Held(text_reply(answer).message, gate, before=2)) as fake, \
            start_nodes(fake.url, "a", "b") as (a, b):
        async with await Peer.connect(a.home) as pa, await Peer.connect(b.home) as pb:
            sid = (await pa.result("session.create", title="made on A"))["session_id"]
            snap = await pb.result("session.resume", session_id=sid)
            assert snap["info"]["title"] == "made on A"
            receipt = await pa.result("prompt.submit", session_id=sid, input_id="in-1",
                                      text="hello from A")
            # live: B's viewer sees the turn start while the model still holds its answer
            await pb.wait_event(lambda e: e["type"] == "message.start")
            assert not gate.is_set()
            gate.set()
            await pa.wait_terminal(sid, receipt["admission_id"])
            stored = await pa.all_events(sid)
            assert {"message.start", "message.complete"} <= {e["type"] for e in stored}
            await caught_up(pb, sid, stored[-1]["seq"])
            await caught_up(pa, sid, stored[-1]["seq"])
            assert_stream(events_of(pb, sid), stored, snap["last_seq"])
            assert_stream(events_of(pa, sid), stored, 0)
            # B's own store reads agree
            assert await pb.all_events(sid) == stored


async def test_prompts_on_both_nodes_reach_viewers_on_both_in_one_order(start_nodes):
    with FakeProvider(lambda req: text_reply(f"answering {prompt_of(req)!r}")) as fake, \
            start_nodes(fake.url, "a", "b") as (a, b):
        async with await Peer.connect(a.home) as pa, await Peer.connect(b.home) as pb:
            sid = (await pa.result("session.create"))["session_id"]
            snap = await pb.result("session.resume", session_id=sid)
            submitted = await asyncio.gather(*(
                peer.result("prompt.submit", session_id=sid, input_id=f"{name}-{i}",
                            text=f"prompt {i} from {name}")
                for i in range(3) for name, peer in (("a", pa), ("b", pb))))
            peers = [pa, pb] * 3
            for peer, receipt in zip(peers, submitted, strict=True):
                done = await peer.wait_terminal(sid, receipt["admission_id"], timeout=60)
                assert done["outcome"] == "completed"
            stored = await pa.all_events(sid)
            assert sum(e["type"] == "message.complete" for e in stored) == 6
            for peer in (pa, pb):
                await caught_up(peer, sid, stored[-1]["seq"])
            assert_stream(events_of(pa, sid), stored, 0)
            assert_stream(events_of(pb, sid), stored, snap["last_seq"])


def listeners(url: str, app: str) -> int:
    return pgstore.rows(url, "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = ?",
                        app)[0][0]


class ListenerKiller:
    """Terminates a node's listening connection whenever it shows up, until stopped."""

    def __init__(self, app: str) -> None:
        self.app = app
        self.killed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            done = pgstore.rows(pgstore.BASE_URL, "SELECT pg_terminate_backend(pid) FROM "
                                "pg_stat_activity WHERE application_name = ?", self.app)
            self.killed += sum(1 for (ok,) in done if ok)
            self._stop.wait(0.02)

    def __enter__(self) -> ListenerKiller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


async def test_a_viewer_keeps_getting_events_while_its_node_cannot_listen(start_nodes,
                                                                          fleet_url):
    gate = threading.Event()

    def model(req: dict) -> Any:
        reply = text_reply(f"answering {prompt_of(req)!r} " + "with many words " * 20)
        return Held(reply.message, gate, before=2) if prompt_of(req) == "first" else reply

    with FakeProvider(model) as fake, start_nodes(fake.url, "a", "b") as (a, b):
        b_app = APP_NAME_PREFIX + b.descriptor["instance_id"]
        await until(lambda: listeners(fleet_url, b_app) == 1, "node B to listen")
        async with await Peer.connect(a.home) as pa, await Peer.connect(b.home) as pb:
            sid = (await pa.result("session.create"))["session_id"]
            snap = await pb.result("session.resume", session_id=sid)
            first = await pa.result("prompt.submit", session_id=sid, input_id="first",
                                    text="first")
            await pb.wait_event(lambda e: e["type"] == "message.start")
            with ListenerKiller(b_app) as killer:
                await until(lambda: killer.killed >= 1, "B's listening connection to go")
                # the rest of the turn, and more turns spread over a couple of seconds,
                # are committed while B's listening connection is cut again and again
                gate.set()
                await pa.wait_terminal(sid, first["admission_id"])
                for i in range(5):
                    await asyncio.sleep(0.3)
                    more = await pa.result("prompt.submit", session_id=sid,
                                           input_id=f"more-{i}", text=f"more {i}")
                    await pa.wait_terminal(sid, more["admission_id"])
                stored = await pa.all_events(sid)
                await caught_up(pb, sid, stored[-1]["seq"])
            assert_stream(events_of(pb, sid), stored, snap["last_seq"])
            log = (b.home / "logs" / "owner.log").read_text()
            assert "not listening for other nodes' events" in log
            # it listens again, and a later turn reaches B as it runs
            await until(lambda: listeners(fleet_url, b_app) == 1, "node B to listen again")
            gate.clear()
            last = await pa.result("prompt.submit", session_id=sid, input_id="first-again",
                                   text="first")
            await pb.wait_event(lambda e: e["type"] == "message.start"
                                and e["seq"] > stored[-1]["seq"])
            gate.set()
            await pa.wait_terminal(sid, last["admission_id"])
            stored = await pa.all_events(sid)
            await caught_up(pb, sid, stored[-1]["seq"])
            assert_stream(events_of(pb, sid), stored, snap["last_seq"])
            # while it could not listen, reads every POLL_SECONDS carried events
            log = (b.home / "logs" / "owner.log").read_text()
            polled = [int(n) for n in re.findall(r"(\d+) event row\(s\) read by polling", log)]
            assert sum(polled) > 0, log


async def test_each_node_listens_on_a_connection_of_its_own(start_nodes, fleet_url):
    with FakeProvider(lambda req: text_reply("unused")) as fake, \
            start_nodes(fake.url, "a", "b") as nodes:
        apps = [APP_NAME_PREFIX + n.descriptor["instance_id"] for n in nodes]
        assert [listeners(fleet_url, app) for app in apps] == [1, 1]
        node: OwnerProcess = nodes[0]
        assert node.stop() == 0
        await until(lambda: listeners(fleet_url, apps[0]) == 0, "A's listener to close")
        assert listeners(fleet_url, apps[1]) == 1
