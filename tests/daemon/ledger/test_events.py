"""Event fan-out: subscribe/activate without gaps or duplicates, bounded viewer queues
that overflow into ``session.replay_gap``, and the journal's durable, gap-free seqs."""

import asyncio

import orjson
import pytest

from tether.daemon.ledger.events import EventBus, EventRecord, Viewer
from tether.daemon.ledger.journal import Journal
from tether.store import Database
from tether.store.tables import events as event_rows
from tether.store.tables import sessions as session_rows


def ev(seq: int, session_id: str = "S", type_: str = "message.delta") -> EventRecord:
    return EventRecord(session_id, seq, type_, {"text": f"#{seq}"})


def frames(viewer: Viewer) -> list[dict]:
    """Everything queued for the viewer, decoded to the event params."""
    return [orjson.loads(f)["params"] for f in viewer.drain_now()]


def seqs(viewer: Viewer) -> list[int]:
    return [p["seq"] for p in frames(viewer)]


def test_events_before_activation_are_held_and_the_snapshot_covers_the_rest():
    bus, v = EventBus(), Viewer(max_events=100, max_subscriptions=4)
    assert bus.subscribe(v, "S")
    bus.publish([ev(1), ev(2), ev(3)])  # published while the snapshot is read
    assert seqs(v) == []
    bus.activate(v, "S", after_seq=2)  # the snapshot already showed 1 and 2
    bus.publish([ev(4)])
    assert seqs(v) == [3, 4]


def test_only_subscribed_sessions_are_delivered_in_order():
    bus = EventBus()
    a, b = Viewer(100, 4), Viewer(100, 4)
    for viewer, sessions in ((a, ["S", "T"]), (b, ["T"])):
        for sid in sessions:
            bus.subscribe(viewer, sid)
            bus.activate(viewer, sid, 0)
    bus.publish([ev(1, "S"), ev(1, "T"), ev(2, "S"), ev(1, "U"), ev(2, "T")])
    assert [(p["session_id"], p["seq"]) for p in frames(a)] == [
        ("S", 1), ("T", 1), ("S", 2), ("T", 2)]
    assert [(p["session_id"], p["seq"]) for p in frames(b)] == [("T", 1), ("T", 2)]
    assert bus.subscribers("T") == 2 and bus.subscribers("U") == 0


def test_subscribing_twice_is_one_subscription():
    bus, v = EventBus(), Viewer(100, 1)
    assert bus.subscribe(v, "S")
    assert bus.subscribe(v, "S")  # the bound is 1: the second takes no new slot
    assert v.sessions == {"S"}
    bus.activate(v, "S", 0)
    bus.activate(v, "S", 0)
    bus.publish([ev(1)])
    assert seqs(v) == [1]


def test_two_snapshots_on_their_way_hold_events_until_the_second_is_answered():
    """session.resume twice without waiting: after the first reply, events past its
    last_seq must wait for the second reply, which a viewer may reset its view to."""
    bus, v = EventBus(), Viewer(100, 4)
    bus.subscribe(v, "S")  # first resume: its snapshot will cover up to 2
    bus.subscribe(v, "S")  # second resume: its snapshot will cover up to 4
    bus.publish([ev(1), ev(2), ev(3)])
    bus.activate(v, "S", 2)  # first reply sent
    bus.publish([ev(4), ev(5)])
    assert seqs(v) == []  # nothing may overtake the second reply
    bus.activate(v, "S", 4)  # second reply sent
    bus.publish([ev(6)])
    assert seqs(v) == [5, 6]


def test_a_failed_snapshot_drops_only_a_subscription_it_made():
    bus, v = EventBus(), Viewer(100, 4)
    bus.subscribe(v, "S")
    bus.abandon(v, "S")  # e.g. not_found: the connection follows nothing
    assert v.sessions == set() and bus.subscribers("S") == 0
    bus.subscribe(v, "T")
    bus.activate(v, "T", 0)
    bus.publish([ev(1, "T")])
    bus.subscribe(v, "T")  # a resume of a followed session fails (storage error)...
    bus.publish([ev(2, "T")])
    bus.abandon(v, "T")  # ...it keeps following, from where it was
    bus.publish([ev(3, "T")])
    assert seqs(v) == [1, 2, 3]


def test_resubscribing_holds_events_until_the_new_snapshot_is_sent():
    bus, v = EventBus(), Viewer(100, 4)
    bus.subscribe(v, "S")
    bus.activate(v, "S", 0)
    bus.publish([ev(1), ev(2)])
    assert seqs(v) == [1, 2]
    assert bus.subscribe(v, "S")  # session.resume again on the same connection
    bus.publish([ev(3), ev(4)])  # committed during the snapshot read...
    assert seqs(v) == []  # ...so they must not overtake the snapshot reply
    bus.activate(v, "S", 3)  # the snapshot covered up to 3
    bus.publish([ev(5)])
    assert seqs(v) == [4, 5]


def test_subscriptions_per_connection_are_bounded():
    bus, v = EventBus(), Viewer(100, max_subscriptions=2)
    assert bus.subscribe(v, "S") and bus.subscribe(v, "T")
    assert not bus.subscribe(v, "U")
    assert v.sessions == {"S", "T"} and bus.subscribers("U") == 0
    bus.unsubscribe(v, "S")
    assert bus.subscribe(v, "U")


def test_overflow_sends_replay_gap_and_unsubscribes_only_the_slow_viewer():
    bus = EventBus()
    slow, fast = Viewer(max_events=3, max_subscriptions=4), Viewer(100, 4)
    for viewer in (slow, fast):
        bus.subscribe(viewer, "S")
        bus.activate(viewer, "S", 0)
    bus.publish([ev(n) for n in range(1, 7)])
    got = frames(slow)
    assert [p["seq"] for p in got[:3]] == [1, 2, 3]
    gap = got[3]
    assert gap["type"] == "session.replay_gap"
    assert gap["payload"] == {"last_seq": 3, "reason": "viewer_queue_overflow"}
    assert gap["seq"] is None  # a notice: it reuses no real event's seq
    assert len(got) == 4
    assert "S" not in slow.sessions
    bus.publish([ev(7)])
    assert frames(slow) == []
    assert seqs(fast) == [1, 2, 3, 4, 5, 6, 7]
    # catching up: resubscribe from the last seq seen
    bus.subscribe(slow, "S")
    bus.activate(slow, "S", 7)
    bus.publish([ev(8)])
    assert seqs(slow) == [8]


def test_overflow_while_releasing_held_events():
    bus, v = EventBus(), Viewer(max_events=2, max_subscriptions=4)
    bus.subscribe(v, "S")
    bus.publish([ev(n) for n in range(1, 6)])
    bus.activate(v, "S", 0)
    got = frames(v)
    assert [p["seq"] for p in got] == [1, 2, None]
    assert got[-1]["type"] == "session.replay_gap"
    assert "S" not in v.sessions


async def test_viewer_frames_leave_in_order_and_sent_events_free_the_bound():
    v = Viewer(max_events=2, max_subscriptions=1)
    v.put_reply(b"r1")
    assert v.put_event(b"e1") and v.put_event(b"e2")
    assert not v.put_event(b"e3")
    assert await v.next_frame() == b"r1"
    assert await v.next_frame() == b"e1"
    assert v.put_event(b"e3")  # one event left the queue, one fits again
    v.put_reply(b"r2")  # replies are not bounded by max_events
    assert [await v.next_frame() for _ in range(3)] == [b"e2", b"e3", b"r2"]
    waiter = asyncio.create_task(v.next_frame())
    await asyncio.sleep(0)
    v.put_event(b"e4")
    assert await waiter == b"e4"


def test_drop_viewer_forgets_all_its_subscriptions():
    bus, v = EventBus(), Viewer(100, 4)
    for sid in ("S", "T"):
        bus.subscribe(v, sid)
        bus.activate(v, sid, 0)
    bus.drop_viewer(v)
    assert v.sessions == set()
    bus.publish([ev(1, "S"), ev(1, "T")])
    assert frames(v) == []


@pytest.fixture
async def journal(tmp_path):
    db = await Database.open(tmp_path / "state.db")
    bus = EventBus()
    await db.write(lambda c: session_rows.insert(
        c, session_id="S", request_id=None, params_digest=None, parent_session_id=None,
        source=None, title=None, cwd=None, options={}, now=0.0))
    yield Journal(db, bus)
    await db.close()


async def test_journal_publishes_committed_events_in_seq_order(journal):
    viewer = Viewer(100, 4)
    journal.bus.subscribe(viewer, "S")
    journal.bus.activate(viewer, "S", 0)

    def unit(tx):
        return [tx.event("S", "message.start", {"admission_id": "a"}, "a"),
                tx.event("S", "message.delta", {"text": "x"}, "a")]

    def broken(tx):
        tx.event("S", "message.delta", {"text": "lost"})
        raise RuntimeError("unit failed")

    futures = [journal.submit(unit), journal.submit(broken), journal.submit(unit)]
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert results[0][0] == [1, 2]
    assert isinstance(results[1], RuntimeError)
    assert results[2][0] == [3, 4]  # the failed unit left no gap
    got = frames(viewer)
    assert [(p["seq"], p["type"]) for p in got] == [
        (1, "message.start"), (2, "message.delta"), (3, "message.start"), (4, "message.delta")]
    assert all(p["payload"].get("text") != "lost" for p in got)
    stored = await journal.db.read(lambda c: event_rows.since(c, "S", 0, 100))
    assert [r["seq"] for r in stored] == [1, 2, 3, 4]
    assert await journal.write(lambda tx: tx.event("S", "session.info", {})) == 5
