"""The PostgreSQL writer's groups in pipeline mode (store/pg/db.py): a unit that fails
rolls back alone, whatever was still unanswered when it failed; a big parameter
leaves the pipeline and comes back; what needs no answer costs no round trip."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from typing import Any

import pgstore
import pytest

from tether.daemon.ledger.events import EventBus
from tether.daemon.ledger.journal import Journal
from tether.store import StorageError
from tether.store.pg import PgDatabase
from tether.store.tables import events as event_rows
from tether.store.tables import messages


@pytest.fixture
async def db() -> AsyncIterator[PgDatabase]:
    with pgstore.fresh_schema() as url:
        db = await PgDatabase.open(url, readers=1)
        try:
            yield db
        finally:
            await db.close()


def new_session(conn: Any, sid: str) -> None:
    conn.execute("INSERT INTO sessions(session_id, options_json, created_at, updated_at) "
                 "VALUES (?, '{}', 0, 0)", (sid,))


async def test_a_failing_unit_rolls_back_alone_in_its_group(db):
    await db.write(lambda c: new_session(c, "s"))

    def event(text: str) -> Any:
        return lambda c: event_rows.append_later(c, "s", "note", f'{{"t":"{text}"}}', None, 0)

    def duplicate(c: Any) -> None:  # a broken constraint nobody waited for
        event_rows.append_later(c, "s", "note", '{"t":"lost"}', None, 0)
        new_session(c, "s")

    def raises(c: Any) -> None:  # the unit's own error, its statements still unanswered
        event_rows.append_later(c, "s", "note", '{"t":"lost too"}', None, 0)
        raise ValueError("no")

    units = [event("a"), duplicate, event("b"), raises, event("c")]
    results = await asyncio.gather(*(db.submit(u) for u in units), return_exceptions=True)
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert isinstance(results[3], ValueError)
    assert all(not isinstance(results[i], BaseException) for i in (0, 2, 4))
    stored = await db.read(lambda c: event_rows.since(c, "s", 0, 100))
    assert [(e["seq"], e["payload_json"]) for e in stored] == [
        (1, '{"t":"a"}'), (2, '{"t":"b"}'), (3, '{"t":"c"}')]


async def test_a_big_row_leaves_the_pipeline_and_the_group_goes_on(db):
    await db.write(lambda c: new_session(c, "s"))
    big = "x" * 5_000_000  # libpq's pipeline can stall sending this (psycopg issue 685)
    rows = [{"role": "user", "content": "small"}, {"role": "assistant", "content": big},
            {"role": "user", "content": "after"}]
    await asyncio.wait_for(asyncio.gather(*(db.submit(
        lambda c, m=m: messages.append(c, "s", [m], 0)) for m in rows)), 60)
    stored = await db.read(lambda c: messages.list_for(c, "s"))
    assert [len(m["content"]) for m in stored] == [5, len(big), 5]


async def test_events_and_rows_cost_no_round_trip_of_their_own(db):
    bus = EventBus()
    journal = Journal(db, bus)
    await db.write(lambda c: new_session(c, "s"))
    before = db.trips.n

    def unit(tx: Any) -> None:
        tx.event("s", "message.delta", {"text": "x"})
        tx.event("s", "message.delta", {"text": "y"})
        messages.append(tx.conn, "s", [{"role": "assistant", "content": "xy"}], tx.now)

    futures = [journal.submit(unit) for _ in range(20)]
    done = await asyncio.gather(*futures)
    # one group (or a few): its COMMIT is the wait, not each event or row
    assert db.trips.n - before <= 2 * db.commits
    # each event was numbered after the commit, in order, without gaps
    seqs = [e.seq for _value, records in done for e in records]
    assert seqs == list(range(1, 41))
    stored = await db.read(lambda c: event_rows.since(c, "s", 0, 100))
    assert [e["seq"] for e in stored] == seqs
    count = await db.read(lambda c: c.execute(
        "SELECT message_count FROM sessions WHERE session_id = 's'").fetchone()[0])
    assert count == 20


@pytest.mark.parametrize("pause", [0.0, 0.2])
async def test_a_write_nobody_waited_for_that_fails_rolls_the_group_back(db, pause):
    """A statement sent without waiting fails only when a later unit waits, or
    sends (with ``pause`` the failure has come back by then, and sending reads
    it): the units that ran are rolled back with it (the one that sent it gets
    its error, the others a transient refusal they may write again); the units
    after them never ran, and commit in the next group. (Without the pause the
    failure may come back as its own unit ends: then that unit fails alone.)"""
    await db.write(lambda c: new_session(c, "s"))

    def sends_a_duplicate(c: Any) -> None:
        c.send("INSERT INTO sessions(session_id, options_json, created_at, updated_at) "
               "VALUES ('s', '{}', 0, 0)")

    def reads(c: Any) -> int:
        time.sleep(pause)  # on the loop: the server answers the duplicate meanwhile
        c.send("SELECT 2")
        return int(c.execute("SELECT 1").fetchone()[0])

    def note(c: Any) -> None:
        event_rows.append_later(c, "s", "note", '{"t":"kept"}', None, 0)

    results = await asyncio.gather(*(db.submit(u) for u in (note, sends_a_duplicate, reads,
                                                            note)),
                                   return_exceptions=True)
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert results[3] is None
    if results[0] is None:
        # the failure came back already as its own unit ended (sending its RELEASE):
        # that unit was rolled back alone, the others committed
        assert results[2] == 1, results
        kept = 2
    else:
        for k in (0, 2):
            assert isinstance(results[k], StorageError) and results[k].transient, results[k]
        kept = 1
    stored = await db.read(lambda c: event_rows.since(c, "s", 0, 100))
    assert [e["payload_json"] for e in stored] == ['{"t":"kept"}'] * kept


class Refused(Exception):
    pass


#: a guard that refuses, answering only after the statements sent after it
SLOW_REFUSAL = "SELECT 1 / COUNT(*) FROM pg_sleep(0.2) WHERE random() < 0"


def notes(c: Any) -> list[str]:
    return [e["payload_json"] for e in event_rows.since(c, "s", 0, 100)]


async def test_a_guard_that_refuses_fails_its_unit_with_the_refusal_and_writes_nothing(db):
    """A guard (PgConn.guard, a fleet's fence) is not waited for: when the unit
    waits for nothing, the refusal comes back only before COMMIT, and the group
    is rolled back (the guarded unit gets its refusal, the others may be written
    again); when the unit waits, it fails alone at that wait."""
    await db.write(lambda c: new_session(c, "s"))

    def guarded(c: Any) -> None:
        c.guard(SLOW_REFUSAL, (), Refused)
        event_rows.append_later(c, "s", "note", '{"t":"refused"}', None, 0)

    def innocent(c: Any) -> None:
        event_rows.append_later(c, "s", "note", '{"t":"innocent"}', None, 0)

    results = await asyncio.gather(db.submit(guarded), db.submit(innocent),
                                   return_exceptions=True)
    assert isinstance(results[0], Refused), results
    assert isinstance(results[1], StorageError) and results[1].transient, results
    assert await db.read(notes) == []

    def guarded_waits(c: Any) -> int:
        c.guard(SLOW_REFUSAL, (), Refused)
        event_rows.append_later(c, "s", "note", '{"t":"refused"}', None, 0)
        return int(c.execute("SELECT 1").fetchone()[0])

    results = await asyncio.gather(db.submit(guarded_waits), db.submit(innocent),
                                   return_exceptions=True)
    assert isinstance(results[0], Refused), results
    assert not isinstance(results[1], BaseException), results
    assert await db.read(notes) == ['{"t":"innocent"}']
    # a guard that lets the unit through costs no wait of its own
    before = db.trips.n
    await db.write(lambda c: (c.guard("SELECT 1 / COUNT(*) FROM sessions", (), Refused),
                              innocent(c)))
    assert db.trips.n - before == 2  # the transaction id, then COMMIT
    assert len(await db.read(notes)) == 2
