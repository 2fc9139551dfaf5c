"""A fleet node's lease bookkeeping while its units wait for PostgreSQL: the loop
runs other work during a unit's wait (store/pg/suspend.py), so what a unit
notes in ``held`` must still be true when the unit's answer comes back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pgstore
import psycopg
import pytest

from tether.daemon.fleet.node import FleetNode
from tether.daemon.ledger.events import EventBus
from tether.daemon.ledger.journal import Fenced, Journal
from tether.daemon.ledger.scheduler import Scheduler
from tether.store.pg import PgDatabase
from tether.store.tables import fleet as fleet_rows

EPOCH = 7


class _Node:
    def __init__(self, url: str, db: PgDatabase) -> None:
        self.url = url
        self.db = db
        self.journal = Journal(db, EventBus())
        self.scheduler = Scheduler(max_running=4)
        self.node = FleetNode(self.journal, self.scheduler, None,  # type: ignore[arg-type]
                              node_id="n1", epoch=EPOCH, lease_seconds=30.0, policy="manual")

    async def take(self, session_id: str) -> int:
        generation = await self.journal.write(
            lambda tx: fleet_rows.take(tx.conn, session_id, EPOCH, tx.now, 30.0))
        assert generation is not None
        return generation

    def lease(self, session_id: str) -> tuple[Any, ...]:
        return pgstore.rows(self.url, "SELECT holder_epoch, generation FROM session_leases "
                                      "WHERE session_id = ?", session_id)[0]


@pytest.fixture
async def fleet() -> AsyncIterator[_Node]:
    with pgstore.fresh_schema() as url:
        db = await PgDatabase.open(url, readers=1)
        here = _Node(url, db)
        try:
            await here.journal.write(lambda tx: fleet_rows.register(
                tx.conn, node_id="n1", epoch=EPOCH, address=None, pid=1, host="h",
                home="/h", now=tx.now, ttl=30.0))
            await here.journal.write(lambda tx: tx.conn.execute(
                "INSERT INTO sessions(session_id, options_json, created_at, updated_at) "
                "VALUES ('s', '{}', 0, 0)"))
            yield here
        finally:
            await db.close()


async def test_a_refused_unit_forgets_only_the_lease_it_was_fenced_with(fleet):
    node = fleet.node
    generation = await fleet.take("s")
    node.held["s"] = generation + 1  # stale: the store holds ``generation``

    def taken_again(tx: Any) -> None:
        node.held["s"] = generation  # what a unit that took the session since notes
        tx.conn.execute("SELECT 1").fetchone()  # the fence is answered with this wait

    with pytest.raises(Fenced):
        await node.journal_for("s").write(taken_again)
    await asyncio.sleep(0)
    assert node.held == {"s": generation}

    node.held["s"] = generation + 1
    with pytest.raises(Fenced):
        await node.journal_for("s").write(lambda tx: tx.conn.execute("SELECT 1").fetchone())
    await asyncio.sleep(0)
    assert node.held == {}


async def test_work_that_comes_back_while_the_release_waits_keeps_its_lease(fleet):
    node, scheduler = fleet.node, fleet.scheduler
    node.held["s"] = await fleet.take("s")
    with psycopg.connect(fleet.url, autocommit=True) as locker:
        locker.execute("BEGIN")
        locker.execute("SELECT 1 FROM session_leases WHERE session_id = 's' FOR UPDATE")
        tick = asyncio.create_task(node._adopt_held())
        deadline = time.monotonic() + 10
        while not pgstore.rows(fleet.url, "SELECT 1 FROM pg_stat_activity WHERE "
                                          "wait_event_type = 'Lock' AND query LIKE 'UPDATE "
                                          "session_leases SET holder_epoch = NULL%'"):
            assert time.monotonic() < deadline, "the release never waited for the lock"
            await asyncio.sleep(0.02)
        # the loop runs while the release waits: a prompt for the session is queued
        scheduler.enqueue("s", "adm_back")
        locker.execute("ROLLBACK")
        await asyncio.wait_for(tick, 10)
    holder, generation = fleet.lease("s")
    assert holder == EPOCH
    assert node.held == {"s": generation}


async def test_an_idle_lease_is_let_go(fleet):
    node = fleet.node
    node.held["s"] = await fleet.take("s")
    await node._adopt_held()
    assert node.held == {}
    assert fleet.lease("s")[0] is None
