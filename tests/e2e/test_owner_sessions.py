"""Sessions through the real owner: idempotent create, resume from another connection,
identical event streams for every viewer, and replay that survives a restart."""

import asyncio
import itertools
import json
import threading
from typing import Any

from fakeprovider import FakeProvider, prompt_of, text_reply
from harness import OwnerProcess, Peer, page_through, until, write_config
from scene import owner_env
from websockets.asyncio.client import unix_connect


def answer(req: dict):
    # long enough to stream in several chunks
    return text_reply(f"Answer to {prompt_of(req)}: " + "lorem ipsum " * 20)


def trace(events: list[dict], session_id: str) -> list[tuple[int, str]]:
    return [(e["seq"], e["type"]) for e in events if e["session_id"] == session_id]


async def test_create_is_idempotent_by_request_id(scene, tmp_path):
    async with scene(None, session=False) as s:
        async with s.peer as peer:
            params = {"request_id": "req-1", "title": "T", "source": "cli",
                      "cwd": str(tmp_path), "model": "m1"}
            first = await peer.result("session.create", **params)
            assert first["session_id"] == first["stored_session_id"]
            assert first["info"]["title"] == "T" and first["info"]["model"] == "m1"
            assert first["messages"] == [] and first["pending"] == []
            assert first["running"] is None and first["last_seq"] == 0
            async with await s.connect() as other:
                again = await other.result("session.create", **params)
            assert again["session_id"] == first["session_id"]

            changed = await peer.call("session.create", **{**params, "title": "U"})
            err = changed["error"]
            assert err["code"] == -32009 and err["message"] == "admission_conflict"
            # without a request_id every call is a new session
            a = await peer.result("session.create", title="T")
            b = await peer.result("session.create", title="T")
            assert len({a["session_id"], b["session_id"], first["session_id"]}) == 3
            listed = await peer.result("session.list")
            assert len(listed["sessions"]) == 3
    assert s.rows("SELECT COUNT(*) FROM sessions WHERE request_id = 'req-1'") == [(1,)]


async def test_resume_from_a_second_connection_sees_the_same_events(scene):
    async with scene(answer, session=False) as s:
        async with s.peer as alice:
            sid = (await alice.result("session.create", title="shared"))["session_id"]
            first = await alice.result("prompt.submit", session_id=sid, input_id="1",
                                       text="one")
            await alice.wait_terminal(sid, first["admission_id"])

            async with await s.connect() as bob:
                snap = await bob.result("session.resume", session_id=sid)
                assert [(m["role"], m["content"]) for m in snap["messages"]] == [
                    ("user", "one"), ("assistant", answer({"messages": [
                        {"role": "user", "content": "one"}]}).message["content"])]
                assert snap["info"]["title"] == "shared"
                seen_at_resume = snap["last_seq"]
                assert seen_at_resume == trace(alice.events, sid)[-1][0]
                assert bob.events == []

                second = await bob.result("prompt.submit", session_id=sid,
                                          input_id="2", text="two")
                for peer in (alice, bob):
                    await peer.wait_event(
                        lambda e: e["type"] == "message.complete"
                        and e["admission_id"] == second["admission_id"])
                    await peer.wait_event(
                        lambda e: e["type"] == "session.info"
                        and e["payload"]["running"] is None
                        and e["seq"] > seen_at_resume + 2)
                after = [t for t in trace(alice.events, sid) if t[0] > seen_at_resume]
                assert trace(bob.events, sid) == after
                assert [t[0] for t in after] == list(
                    range(seen_at_resume + 1, seen_at_resume + 1 + len(after)))
                types = [t[1] for t in after]
                assert types[0] == "session.info"
                assert "message.start" in types and "message.delta" in types
                assert types.index("message.start") < types.index("message.complete")
                # the payloads are identical too, not just the types
                assert [e for e in alice.events if e["seq"] > seen_at_resume] == bob.events

                # resume with after_seq returns the missed events inline
                snap = await bob.result("session.resume", session_id=sid, after_seq=2)
                assert [e["seq"] for e in snap["events"]] == list(
                    range(3, snap["last_seq"] + 1))

            # a detached viewer gets nothing more
            await alice.result("session.detach", session_id=sid)
            count = len(alice.events)
            async with await s.connect() as carol:
                await carol.result("session.resume", session_id=sid)
                third = await carol.result("prompt.submit", session_id=sid,
                                           input_id="3", text="three")
                await carol.wait_event(lambda e: e["type"] == "message.complete")
                await carol.wait_terminal(sid, third["admission_id"])
            # frames leave a connection in order: an event published for alice
            # before the turn ended would have arrived before this pong
            await alice.result("ping")
            assert len(alice.events) == count


async def test_events_since_replays_across_an_owner_restart(tmp_path, store_url):
    home = tmp_path / "home"
    env = owner_env(home, store_url)
    with FakeProvider(answer) as provider:
        write_config(home, provider.url)
        with OwnerProcess(home, env=env):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create"))["session_id"]
                for i in range(2):
                    r = await peer.result("prompt.submit", session_id=sid, input_id=f"i{i}",
                                          text=f"q{i}")
                    await peer.wait_terminal(sid, r["admission_id"])
                before = await peer.result("session.events.since", session_id=sid,
                                           after_seq=0)
        seqs = [e["seq"] for e in before["events"]]
        assert seqs == list(range(1, len(seqs) + 1)) and before["last_seq"] == seqs[-1]
        assert [e["type"] for e in before["events"]].count("message.complete") == 2

        with OwnerProcess(home, env=env):
            async with await Peer.connect(home) as peer:
                after = await peer.result("session.events.since", session_id=sid,
                                          after_seq=0)
                assert after == before
                tail = await peer.result("session.events.since", session_id=sid,
                                         after_seq=3, limit=2)
                assert [e["seq"] for e in tail["events"]] == [4, 5]
                assert tail["last_seq"] == before["last_seq"]

                # the sequence continues gap-free in the new epoch
                snap = await peer.result("session.resume", session_id=sid)
                assert snap["last_seq"] == before["last_seq"]
                assert len(snap["messages"]) == 4
                r = await peer.result("prompt.submit", session_id=sid, input_id="i2",
                                      text="q2")
                await peer.wait_terminal(sid, r["admission_id"])
                full = await peer.result("session.events.since", session_id=sid,
                                         after_seq=0)
                seqs = [e["seq"] for e in full["events"]]
                assert seqs == list(range(1, len(seqs) + 1))
                assert full["events"][: len(before["events"])] == before["events"]
                assert trace(peer.events, sid) == [
                    (e["seq"], e["type"]) for e in full["events"]
                    if e["seq"] > before["last_seq"]]


async def test_viewers_joining_mid_stream_miss_nothing_and_see_nothing_twice(scene):
    release = [threading.Event() for _ in range(4)]

    def handler(req):
        n = int(prompt_of(req).removeprefix("turn "))
        release[n].wait(10)  # the test lets each turn run when it wants
        return answer(req)

    async with scene(handler, session=False) as s:
        async with s.peer as alice:
            sid = (await alice.result("session.create"))["session_id"]
            receipts = [await alice.result("prompt.submit", session_id=sid,
                                           input_id=f"t{n}", text=f"turn {n}")
                        for n in range(4)]
            viewers: list[tuple[Peer, int, dict]] = []
            try:
                for n in range(4):
                    # join while turn n is in flight (started, answer not yet sent)
                    await alice.wait_event(
                        lambda e, n=n: e["type"] == "message.start"
                        and e["admission_id"] == receipts[n]["admission_id"])
                    peer = await s.connect()
                    after = max(0, len(alice.events) - 3)  # claims to have seen some
                    snap = await peer.result("session.resume", session_id=sid,
                                             after_seq=after)
                    assert snap["running"] == receipts[n]["admission_id"]
                    viewers.append((peer, after, snap))
                    release[n].set()
                await alice.wait_terminal(sid, receipts[-1]["admission_id"])
                full = (await alice.result("session.events.since", session_id=sid,
                                           after_seq=0))["events"]
                assert [e["seq"] for e in full] == list(range(1, len(full) + 1))
                assert alice.events == full
                for peer, after, snap in viewers:
                    await peer.result("ping")  # every event published so far is in
                    # what the snapshot replayed, then the live stream: each event
                    # after `after` exactly once, in order
                    assert snap["events"] + peer.events == full[after:]
            finally:
                for r in release:
                    r.set()
                for peer, _, _ in viewers:
                    await peer.close()


class ArrivalMarks(list):
    """``Peer.other`` that also notes how many events had arrived before each frame."""

    def __init__(self, peer: Peer) -> None:
        super().__init__()
        self.peer = peer
        self.marks: list[int] = []

    def append(self, msg) -> None:
        self.marks.append(len(self.peer.events))
        super().append(msg)


async def test_resuming_again_on_the_same_connection_keeps_events_in_order(scene):
    async with scene(answer) as s:
        peer, sid = s.peer, s.session_id
        marks = peer.other = ArrivalMarks(peer)
        receipts = [await peer.result("prompt.submit", session_id=sid,
                                      input_id=f"t{n}", text=f"turn {n}")
                    for n in range(12)]

        async def keep_reader_busy() -> None:
            # other viewers' reads queue up on the owner's reader: each resume
            # below then takes long enough for turns to publish events meanwhile
            async with await s.connect() as other:
                while True:
                    await asyncio.gather(*(
                        other.result("session.events.since", session_id=sid,
                                     after_seq=0) for _ in range(4)))

        noise = asyncio.create_task(keep_reader_busy())
        try:
            # re-sync while turns stream: resume again, from a few events back
            for n in range(40):
                after = max(0, len(peer.events) - 2)
                await peer.send_raw(json.dumps({
                    "jsonrpc": "2.0", "id": f"resume-{n}", "method": "session.resume",
                    "params": {"session_id": sid, "after_seq": after}}))
                while len(marks) <= n:
                    await asyncio.sleep(0.001)
            await peer.wait_terminal(sid, receipts[-1]["admission_id"])
        finally:
            noise.cancel()
        await peer.result("ping")
        full = (await peer.result("session.events.since", session_id=sid,
                                  after_seq=0))["events"]
        # apply the frames in arrival order, as a viewer would: a snapshot resets
        # the view to its last_seq, and every live event must continue the view
        # exactly (no gap, nothing from before the snapshot, nothing twice)
        last, shown = 0, 0
        for reply, mark in [*zip(marks, marks.marks, strict=True),
                            (None, len(peer.events))]:
            for e in peer.events[shown:mark]:
                assert e["seq"] == last + 1, (e["seq"], last)
                assert e == full[e["seq"] - 1]
                last = e["seq"]
            shown = mark
            if reply is not None:
                snap = reply["result"]
                assert snap["last_seq"] >= last  # a snapshot never goes backwards
                assert snap["events"] == full[snap["events"][0]["seq"] - 1:
                                              snap["last_seq"]] if snap["events"] \
                    else True
                last = snap["last_seq"]
        assert last == len(full)


async def test_a_viewer_that_stops_reading_gets_a_replay_gap_and_catches_up(scene):
    big = "x" * 60_000  # each answer fills a good part of a socket buffer

    async with scene(lambda req: text_reply(prompt_of(req) + big), session=False,
                     daemon={"viewer_queue_events": 4}) as s:
        async with s.peer as fast:
            sid = (await fast.result("session.create"))["session_id"]
            # a raw viewer that subscribes, then stops reading its socket
            slow = await unix_connect(str(s.home / "daemon.sock"), max_size=None,
                                      max_queue=1)
            await slow.send(json.dumps({"jsonrpc": "2.0", "id": 1,
                                        "method": "session.resume",
                                        "params": {"session_id": sid}}))
            assert json.loads(await slow.recv())["result"]["last_seq"] == 0
            receipts = [await fast.result("prompt.submit", session_id=sid,
                                          input_id=f"t{n}", text=f"turn {n}")
                        for n in range(12)]
            # the turns and the other viewer carry on regardless
            for r in receipts:
                done = await fast.wait_terminal(sid, r["admission_id"])
                assert done["outcome"] == "completed"
            full = await fast.all_events(sid)
            await fast.result("ping")
            assert fast.events == full

            # the slow viewer reads now: events in order, then the gap notice
            got = []
            while True:
                msg = json.loads(await asyncio.wait_for(slow.recv(), 30))
                if msg.get("method") != "event":
                    continue
                got.append(msg["params"])
                if msg["params"]["type"] == "session.replay_gap":
                    break
            gap = got.pop()
            assert gap["session_id"] == sid
            assert gap["payload"]["reason"] == "viewer_queue_overflow"
            last = gap["payload"]["last_seq"]
            assert got == full[:last]
            assert last < len(full)
            # it is unsubscribed (nothing more arrives after the notice) and catches up
            await slow.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
            assert json.loads(await slow.recv()) == {"jsonrpc": "2.0", "id": 2,
                                                     "result": {"pong": True}}
            ids = itertools.count(3)

            async def since(after: int) -> dict[str, Any]:
                rid = next(ids)
                await slow.send(json.dumps({
                    "jsonrpc": "2.0", "id": rid, "method": "session.events.since",
                    "params": {"session_id": sid, "after_seq": after, "limit": 10000}}))
                reply = json.loads(await slow.recv())
                assert reply["id"] == rid
                return reply["result"]

            rest = await page_through(since, last)
            assert got + rest == full
            await slow.close()


async def test_a_resume_pipelined_after_a_detach_stays_subscribed(scene):
    """detach then resume, sent back to back by a connection that does not follow
    the session: the connection follows it afterwards. (The detach used to look
    the session up first and then drop the subscription the resume had made
    meanwhile.) Both replies come; in which order is not promised: pipelined
    requests run concurrently, and on PostgreSQL their reads run on separate
    connections of the read pool."""
    async with scene(answer, session=False) as s:
        async with s.peer as alice, await s.connect() as bob:
            sid = (await alice.result("session.create"))["session_id"]
            for rid, method in ((901, "session.detach"), (902, "session.resume")):
                await bob.send_raw(json.dumps({"jsonrpc": "2.0", "id": rid,
                                               "method": method,
                                               "params": {"session_id": sid}}))
            await until(lambda: len(bob.other) == 2, "both replies")
            replies = {r["id"]: r for r in bob.other}
            assert sorted(replies) == [901, 902]
            assert replies[901]["result"] == {"ok": True}
            assert replies[902]["result"]["session_id"] == sid
            r = await alice.result("prompt.submit", session_id=sid, input_id="1",
                                   text="one")
            await alice.wait_terminal(sid, r["admission_id"])
            await bob.wait_event(lambda e: e["type"] == "message.complete")
            assert trace(bob.events, sid) == trace(alice.events, sid)
