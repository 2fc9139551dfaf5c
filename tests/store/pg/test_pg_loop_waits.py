"""A PostgreSQL writer unit that waits for an answer gives the event loop back
(store/pg/suspend.py): the loop serves other work meanwhile, the group's units
still run in submit order, and a failure during the wait fails what it failed
before (the unit alone, or the group when the connection broke)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pgstore
import psycopg
import pytest

from tether.store import StorageError
from tether.store.pg import PgDatabase


@pytest.fixture
async def db() -> AsyncIterator[PgDatabase]:
    with pgstore.fresh_schema() as url:
        db = await PgDatabase.open(url, readers=1)
        try:
            yield db
        finally:
            await db.close()


async def _ticking(stop: asyncio.Event, ticks: list[float]) -> None:
    while not stop.is_set():
        await asyncio.sleep(0.01)
        ticks.append(time.monotonic())


def _sleep_then(value: str, seconds: float) -> Any:
    def unit(c: Any) -> str:
        (slept,) = c.execute("SELECT pg_sleep(?)::text", (seconds,)).fetchone()
        assert slept == ""  # pg_sleep returns void, read as an empty text
        return value
    return unit


async def test_the_loop_runs_while_a_unit_waits_for_its_answer(db):
    stop, ticks = asyncio.Event(), []
    ticker = asyncio.create_task(_ticking(stop, ticks))
    await asyncio.sleep(0.05)
    started = time.monotonic()
    value = await db.write(_sleep_then("done", 0.5))
    ended = time.monotonic()
    stop.set()
    await ticker
    assert value == "done"
    assert ended - started >= 0.5
    during = [t for t in ticks if started < t < ended]
    # a blocked loop would tick once at most, after the answer came; a 10 ms sleep
    # that runs freely ticks about 50 times in half a second
    assert len(during) >= 20, len(during)


async def test_the_units_of_groups_keep_submit_order_while_the_loop_goes_on(db):
    await db.write(lambda c: c.execute("CREATE TABLE IF NOT EXISTS seen(k INTEGER, v TEXT)"))
    order: list[str] = []

    def unit(k: int) -> Any:
        def run(c: Any) -> int:
            (n,) = c.execute("SELECT COUNT(*) FROM seen").fetchone()  # waits
            order.append(f"ran {k}")
            c.execute("INSERT INTO seen(k, v) VALUES (?, ?)", (k, f"after {n}"))
            return int(n)
        return run

    first = db.submit(_sleep_then("slow", 0.2))
    await asyncio.sleep(0.05)  # the first group is waiting on the server now
    later = [db.submit(unit(k)) for k in range(5)]  # they join the next group
    order.append("submitted")
    counts = await asyncio.gather(*later)
    assert await first == "slow"
    assert order == ["submitted"] + [f"ran {k}" for k in range(5)]
    assert counts == [0, 1, 2, 3, 4]
    assert db.commits >= 2


async def test_a_unit_that_fails_after_its_wait_fails_alone(db):
    def fails(c: Any) -> None:
        c.execute("SELECT 1").fetchone()
        raise ValueError("its own error")

    results = await asyncio.gather(db.submit(_sleep_then("a", 0.05)), db.submit(fails),
                                   db.submit(_sleep_then("c", 0.05)), return_exceptions=True)
    assert results[0] == "a" and results[2] == "c"
    assert isinstance(results[1], ValueError)


async def test_a_connection_broken_during_the_wait_fails_the_group_and_the_next_connects(db):
    (pid,) = await db.write(lambda c: c.execute("SELECT pg_backend_pid()").fetchone())

    async def terminate() -> None:
        await asyncio.sleep(0.2)
        with psycopg.connect(db.url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    killer = asyncio.create_task(terminate())
    with pytest.raises(StorageError) as caught:
        await db.write(_sleep_then("never", 5))
    await killer
    assert caught.value.transient and caught.value.reason == "database_unreachable"
    (again,) = await db.write(lambda c: c.execute("SELECT pg_backend_pid()").fetchone())
    assert again != pid
