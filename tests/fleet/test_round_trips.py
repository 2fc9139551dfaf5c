"""Round trips to PostgreSQL per admission and per turn, pinned; and the fence that
rides along with a turn's writes instead of costing a round trip of its own.

The owner's services run in-process (daemon/services.py's own wiring) on a fresh
schema, as one node of a fleet whose tick is not started, so that nothing but
the admission or the turn under test talks to the database: the counts are
exact, and a change that adds a wait fails here. `round_trips()` is what
``tether bench --store`` reports, counted the same way (one per wait for the
server's answer). docs/performance.md, "Round 7", traces each one.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pgstore
import pytest

from tether.bench import InstantProvider
from tether.daemon.config.core import Config
from tether.daemon.config.store import StoreConfig
from tether.daemon.ledger.journal import Fenced
from tether.daemon.runtime.home import Home
from tether.daemon.services import Services, build_services
from tether.rpc.models import PromptSubmitParams
from tether.store import StorageError
from tether.store.pg.connection import round_trips
from tether.store.tables import fleet as fleet_rows
from tether.store.tables import sessions as session_rows

#: an admission: the unit's one wait (the bound, the insert and the lease take in one
#: pipeline) and the group's COMMIT; no lookup before it (a retry is found by its insert)
ADMISSION = 2
#: a retry: the same unit, whose insert finds the identity taken, then reads that row
RETRY = 3
#: a finite turn, its admission included: ADMISSION; the start (its one wait, the
#: fence riding with it) and COMMIT; the transcript, one statement; the end, one
#: unit (the streamed text, the assistant's row and the outcome): the outcome's
#: one wait and COMMIT
TURN = ADMISSION + 2 + 1 + 2


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[tuple[Services, str]]:
    with pgstore.fresh_schema() as url:
        config = Config()
        config = dataclasses.replace(config, daemon=dataclasses.replace(config.daemon,
                                                                        grace_seconds=0))
        async with build_services(Home(tmp_path), config, StoreConfig(url=url),
                                  overrides={"demo": InstantProvider()}) as services:
            # registered as serving, but without the fleet's tick (heartbeats, adoption
            # reads): nothing else talks to the database
            await services.journal.write(lambda tx: fleet_rows.register(
                tx.conn, node_id="n", epoch=services.epoch, address=None, pid=1, host="h",
                home=str(tmp_path), now=tx.now, ttl=300))
            for sid in ("s1", "s2"):
                await services.journal.write(lambda tx, sid=sid: session_rows.insert(
                    tx.conn, session_id=sid, request_id=None, params_digest=None,
                    parent_session_id=None, source="api", title=None, cwd=None, options={},
                    now=1.0))
            yield services, url


async def until_status(url: str, admission_id: str, status: str) -> None:
    # read on a connection of the test's own: it is not counted
    for _ in range(400):
        rows = pgstore.rows(url, "SELECT status FROM session_admissions WHERE admission_id = ?",
                            admission_id)
        if rows and rows[0][0] == status:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{admission_id} did not become {status}")


async def test_an_admission_and_a_turn_cost_the_pinned_round_trips(node):
    services, url = node
    # a turn that holds at the model, so that the admission measured next queues
    # behind it and starts nothing meanwhile
    first = await services.admissions.submit(
        PromptSubmitParams(session_id="s1", input_id="running", text="bench-hold 1"))
    await until_status(url, first["admission_id"], "started")
    await asyncio.sleep(0.05)  # its transcript read
    queued = PromptSubmitParams(session_id="s1", input_id="queued", text="bench-hold 1")
    before = round_trips()
    receipt = await services.admissions.submit(queued)
    assert round_trips() - before == ADMISSION
    # a retry is answered by the row its insert ran into
    before = round_trips()
    assert (await services.admissions.submit(queued))["admission_id"] == receipt["admission_id"]
    assert round_trips() - before == RETRY

    for i in range(2):  # the first and a later turn of a session cost the same
        before = round_trips()
        receipt = await services.admissions.submit(
            PromptSubmitParams(session_id="s2", input_id=f"turn-{i}", text="hello", finite=True))
        await until_status(url, receipt["admission_id"], "terminal")
        await asyncio.sleep(0.05)  # the runner's last steps after the outcome's commit
        assert round_trips() - before == TURN, i
    rows = pgstore.rows(url, "SELECT status, outcome FROM session_admissions "
                             "WHERE target_session_id = 's2'")
    assert rows == [("terminal", "completed")] * 2
    # the turn's writes all landed, the lease still this node's
    kinds = [r[0] for r in pgstore.rows(url, "SELECT type FROM events WHERE session_id = 's2' "
                                             "ORDER BY seq")]
    assert kinds.count("message.start") == kinds.count("message.complete") == 2
    assert services.placement.held["s2"] == 1


def note(tx: Any, sid: str, text: str) -> None:
    tx.event(sid, "note", {"text": text})


async def take_over(url: str, sid: str) -> None:
    """What another node's takeover does to the lease: its generation moves on."""
    pgstore.rows(url, "UPDATE session_leases SET holder_epoch = holder_epoch + 1000, "
                      "generation = generation + 1 WHERE session_id = ?", sid)


async def test_a_fence_that_refuses_a_unit_with_no_wait_writes_nothing_of_it(node):
    """A turn's progress waits for nothing: its fence is answered when the unit
    sends its next statement (then it fails alone) or at the group's COMMIT (then
    the group commits nothing, and its other units get a transient refusal: they
    may be written again). Either way the unit gets `Fenced`, nothing of it is
    stored, and the node lets the session go."""
    services, url = node
    placement = services.placement
    await services.journal.write(lambda tx: placement.place(tx, "s1", "none")())
    assert "s1" not in placement.held  # no admission "none": nothing taken
    await services.admissions.submit(PromptSubmitParams(session_id="s1", input_id="a",
                                                        text="bench-hold 1"))
    await services.admissions.submit(PromptSubmitParams(session_id="s2", input_id="b",
                                                        text="bench-hold 1"))
    assert set(placement.held) == {"s1", "s2"}
    await take_over(url, "s1")
    before = pgstore.rows(url, "SELECT COUNT(*) FROM events")[0][0]
    fenced = placement.journal_for("s1").submit(lambda tx: note(tx, "s1", "late"))
    other = services.journal.submit(lambda tx: note(tx, "s2", "innocent"))
    results = await asyncio.gather(fenced, other, return_exceptions=True)
    assert isinstance(results[0], Fenced), results
    if isinstance(results[1], BaseException):  # rolled back with the group
        assert isinstance(results[1], StorageError) and results[1].transient, results
        assert pgstore.rows(url, "SELECT COUNT(*) FROM events")[0][0] == before
        # written again, the innocent unit lands
        await services.journal.write(lambda tx: note(tx, "s2", "innocent"))
    assert "s1" not in placement.held and "s2" in placement.held
    # the session still held writes on
    await placement.journal_for("s2").write(lambda tx: note(tx, "s2", "held"))
    notes = pgstore.rows(url, "SELECT payload_json FROM events WHERE type = 'note' "
                              "ORDER BY seq")
    assert [r[0] for r in notes] == ['{"text":"innocent"}', '{"text":"held"}']


async def test_a_fence_that_refuses_a_unit_that_waits_fails_that_unit_alone(node):
    """Here the fence refuses at its sixth use on the writer's connection, the use at
    which psycopg prepares it (recording its name as it sends it): before the
    writer made psycopg forget its prepared statements after a failure
    (pg/connection.forget_prepared), the next unit's fence was told "prepared statement
    … does not exist"."""
    services, url = node
    placement = services.placement
    for sid in ("s1", "s2"):
        await services.admissions.submit(PromptSubmitParams(session_id=sid, input_id="a",
                                                            text="bench-hold 1"))
    await take_over(url, "s1")

    def reads(tx: Any) -> int:
        note(tx, "s1", "late")
        return int(tx.conn.execute("SELECT 1").fetchone()[0])  # the fence's answer with it

    results = await asyncio.gather(
        placement.journal_for("s1").submit(reads),
        placement.journal_for("s2").submit(lambda tx: note(tx, "s2", "kept")),
        return_exceptions=True)
    assert isinstance(results[0], Fenced), results
    assert not isinstance(results[1], BaseException), results
    notes = pgstore.rows(url, "SELECT session_id, payload_json FROM events "
                              "WHERE type = 'note'")
    assert notes == [("s2", '{"text":"kept"}')]
    # a node that lost the session never writes for it again, not even a read-only unit
    with pytest.raises(Fenced):
        await placement.journal_for("s1").write(lambda tx: None)
