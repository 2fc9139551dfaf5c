"""The feed's sequencing, in-process: two nodes' journals on one PostgreSQL schema.

Each node is what owner.py builds on a shared store: a `PgDatabase`, its `Feed`
(the bus) and a `Journal` that announces its commits. Viewers subscribe as the
snapshot protocol does (subscribe, read last_seq, activate), so the tests can
put the protocol's steps in the orders a busy node may see them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import orjson
import psycopg
from harness import until
from psycopg import sql

from tether.daemon.fleet.feed import CHANNEL_SQL, Feed
from tether.daemon.ledger.events import Viewer
from tether.daemon.ledger.journal import Journal, Tx
from tether.store.pg import PgDatabase
from tether.store.pg.connection import GATHER_MAX_CHARS, gathered
from tether.store.tables import events as event_rows
from tether.store.tables import sessions as session_rows


@dataclass
class Node:
    db: PgDatabase
    feed: Feed
    journal: Journal

    async def last_seq(self, sid: str) -> int:
        return await self.db.read(lambda c: event_rows.last_seq(c, sid))

    async def follow(self, sid: str) -> Viewer:
        """A viewer subscribed as session.resume does it."""
        viewer = Viewer(100_000, 10)
        assert self.feed.subscribe(viewer, sid)
        self.feed.activate(viewer, sid, await self.last_seq(sid))
        return viewer

    async def emit(self, sid: str, count: int, tag: str) -> None:
        def unit(tx: Tx) -> None:
            for i in range(count):
                tx.event(sid, "message.delta", {"text": f"{tag}.{i}"})

        await self.journal.write(unit)


@asynccontextmanager
async def node(url: str, name: str) -> AsyncIterator[Node]:
    db = await PgDatabase.open(url, readers=2)
    feed = Feed(db, f"node-{name}")
    try:
        await feed.start()
        assert feed.listening
        yield Node(db, feed, Journal(db, feed, announce=feed.announce))
    finally:
        await feed.stop()
        await db.close()


async def new_session(n: Node, sid: str) -> str:
    await n.db.write(lambda c: session_rows.insert(
        c, session_id=sid, request_id=None, params_digest=None, parent_session_id=None,
        source="api", title=None, cwd=None, options={}, now=1.0))
    return sid


def seqs(viewer: Viewer) -> list[int]:
    """The seqs of the event frames the viewer was sent (replay gaps would show as None)."""
    return [orjson.loads(f)["params"]["seq"] for f in viewer.drain_now()]


async def test_both_nodes_writing_one_session_every_viewer_gets_every_seq_once_in_order(
        fleet_url):
    async with node(fleet_url, "a") as a, node(fleet_url, "b") as b:
        sid = await new_session(a, "ses_both")
        other = await new_session(a, "ses_other")  # nobody follows it: nothing to read
        seen = {name: [] for name in ("a", "b")}
        va, vb = await a.follow(sid), await b.follow(sid)
        rng = random.Random(7)

        async def writer(n: Node, tag: str) -> None:
            for i in range(150):
                await n.emit(sid if rng.random() < 0.9 else other, rng.randint(1, 3), f"{tag}{i}")
                if rng.random() < 0.3:
                    await asyncio.sleep(0)

        # each node's commits are concurrent with the other's: a node's own seq 7
        # often reaches its bus before seq 6, committed elsewhere, has been read
        await asyncio.gather(writer(a, "a"), *(writer(b, f"b{k}") for k in range(2)))
        last = await a.last_seq(sid)

        def caught_up() -> bool:
            seen["a"] += seqs(va)
            seen["b"] += seqs(vb)
            return all(s and s[-1] == last for s in seen.values())

        await until(caught_up, "both viewers to reach the last seq")
        assert seen["a"] == seen["b"] == list(range(1, last + 1))
        assert b.feed.tracked() == {sid: last}


async def test_a_feed_starts_from_the_lowest_of_the_first_snapshots(fleet_url):
    async with node(fleet_url, "a") as a, node(fleet_url, "b") as b:
        sid = await new_session(a, "ses_snapshots")
        await a.emit(sid, 1, "before")
        # two viewers subscribe to a session nobody here followed; their snapshots
        # are read at different times (one before A commits two more events, one
        # after) and answered in the other order
        early, late = Viewer(1000, 10), Viewer(1000, 10)
        assert b.feed.subscribe(early, sid) and b.feed.subscribe(late, sid)
        early_last = await b.last_seq(sid)
        await a.emit(sid, 2, "between")
        late_last = await b.last_seq(sid)
        assert (early_last, late_last) == (1, 3)
        b.feed.activate(late, sid, late_last)
        await asyncio.sleep(0.2)  # A's notification is heard meanwhile; nothing may go out yet
        assert b.feed.tracked() == {sid: None}
        assert seqs(late) == []
        b.feed.activate(early, sid, early_last)
        await a.emit(sid, 2, "after")
        got = {"early": [], "late": []}

        def caught_up() -> bool:
            got["early"] += seqs(early)
            got["late"] += seqs(late)
            return all(s and s[-1] == 5 for s in got.values())

        await until(caught_up, "both viewers to reach seq 5")
        # each from its own snapshot on: nothing missing, nothing twice
        assert got == {"early": [2, 3, 4, 5], "late": [4, 5]}


async def test_tracking_ends_with_the_last_subscriber(fleet_url):
    async with node(fleet_url, "a") as a, node(fleet_url, "b") as b:
        sid = await new_session(a, "ses_leave")
        viewer = await b.follow(sid)
        await a.emit(sid, 2, "x")
        await until(lambda: b.feed.tracked() == {sid: 2}, "B to publish both events")
        b.feed.drop_viewer(viewer)
        assert b.feed.tracked() == {}
        await a.emit(sid, 1, "y")
        # following again starts from the new snapshot, not from where it left off
        again = await b.follow(sid)
        await a.emit(sid, 1, "z")
        await until(lambda: b.feed.tracked() == {sid: 4}, "B to publish seq 4")
        assert seqs(again) == [4]


async def test_a_commit_names_its_sessions_and_a_node_not_following_them_does_not_read(
        fleet_url):
    async with node(fleet_url, "a") as a, node(fleet_url, "b") as b:
        followed = await new_session(a, "ses_followed")
        other = await new_session(a, "ses_other")
        viewer = await b.follow(followed)
        # what goes over the channel: one notification per commit, naming the
        # sessions of every unit of the group, once each
        listener = await psycopg.AsyncConnection.connect(b.db.url, autocommit=True)
        async with listener:
            cur = await listener.execute(f"SELECT {CHANNEL_SQL}")
            (channel,) = await cur.fetchone()
            await listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))

            def both(tx: Tx) -> None:
                for sid in (other, followed, other):
                    tx.event(sid, "message.delta", {"text": "x"})

            await a.journal.write(both)
            notes = []
            async for note in listener.notifies(timeout=5, stop_after=1):
                notes.append(note.payload)
        assert notes == [f"node-a {other} {followed}"]
        await until(lambda: b.feed.tracked() == {followed: 1}, "B to publish the followed event")
        assert seqs(viewer) == [1]
        # a commit of a session B does not follow asks B for no read at all
        reads, skipped = b.feed._reads, b.feed.skipped
        await a.emit(other, 3, "unfollowed")
        await until(lambda: b.feed.skipped == skipped + 1, "B to hear the notification")
        await asyncio.sleep(0.2)
        assert b.feed._reads == reads
        # and one of a followed session still reaches the viewer
        await a.emit(followed, 1, "followed")
        await until(lambda: b.feed.tracked() == {followed: 2}, "B to publish seq 2")
        assert seqs(viewer) == [2] and b.feed._reads > reads


def test_gathered_items_fall_back_to_every_session_past_the_payload_limit():
    assert gathered(["ses_a", "ses_b"]) == "ses_a ses_b"
    many = [f"ses_{i:08d}" for i in range(1000)]
    assert len(" ".join(many)) > GATHER_MAX_CHARS
    assert gathered(many) == "*"
