"""An idle session's turn starts in the commit that admits it (Scheduler.start_now):
one commit fewer per turn, and what the receipt, the events, a failure and a stop
see of it. A real store, the owner's services and an instant model."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tether.bench import InstantProvider
from tether.daemon.ledger import admissions as admission_service
from tether.daemon.ledger import rules as ledger
from tether.store import StorageError
from tether.store.tables import admissions as admission_rows

SID = "ses_000000000000000000000002"


@pytest.fixture
async def parts(wire) -> Any:
    async with wire({"demo": InstantProvider()}) as p:
        await p.new_session(SID)
        yield p


def payload(text: str) -> str:
    return ledger.encode_payload(ledger.canonical_payload(text, True, {}, None))


async def admit(p: Any, input_id: str) -> dict[str, Any]:
    return await p.admissions.admit("local", SID, input_id, payload(input_id))


async def row_of(p: Any, input_id: str) -> dict[str, Any] | None:
    return await p.db.read(lambda c: admission_rows.find(c, "local", SID, input_id))


async def events(p: Any) -> list[tuple[str, dict[str, Any], str | None]]:
    import orjson

    rows = await p.db.read(lambda c: c.execute(
        "SELECT type, payload_json, admission_id FROM events WHERE session_id = ? "
        "ORDER BY seq", (SID,)).fetchall())
    return [(r[0], orjson.loads(r[1]), r[2]) for r in rows]


async def test_an_idle_sessions_turn_starts_in_the_commit_that_admits_it(parts):
    before = parts.db.commits
    receipt = await admit(parts, "one")
    aid = receipt["admission_id"]
    assert receipt["status"] == "started"
    # the admission and the start were one commit: the row is started already
    assert parts.db.commits - before == 1
    assert (await row_of(parts, "one"))["status"] in ("started", "terminal")
    await asyncio.wait_for(parts.turns.wait(SID, aid, 10), 10)
    assert parts.db.commits - before == 2  # and the turn's end
    assert (await row_of(parts, "one"))["outcome"] == "completed"
    seen = await events(parts)
    assert [t for t, _, _ in seen][:2] == ["session.info", "message.start"]
    assert seen[0][1] == {"pending": [], "running": aid}
    assert [t for t, _, _ in seen][-2:] == ["message.complete", "session.info"]
    assert seen[-1][1]["running"] is None


async def test_an_admission_behind_a_turn_waits_queued_and_runs_after_it(parts):
    first, second = await asyncio.gather(admit(parts, "first"), admit(parts, "second"))
    assert (first["status"], second["status"]) == ("started", "queued")
    for r in (first, second):
        await asyncio.wait_for(parts.turns.wait(SID, r["admission_id"], 10), 10)
    for _ in range(100):
        if (await row_of(parts, "second"))["status"] == "terminal":
            break
        await asyncio.sleep(0.02)
    rows = [await row_of(parts, i) for i in ("first", "second")]
    assert [(r["status"], r["outcome"]) for r in rows] == [("terminal", "completed")] * 2
    assert rows[0]["finished_at"] <= rows[1]["started_at"]
    # the queued one was announced pending, then started in a unit of its own
    infos = [pl for t, pl, _ in await events(parts) if t == "session.info"]
    assert {"pending": [second["admission_id"]], "running": first["admission_id"]} in infos


async def test_a_start_that_fails_in_the_admissions_unit_records_neither(parts, monkeypatch):
    real = admission_service.outcomes.begun

    def failing(tx, *args, **kwargs):
        real(tx, *args, **kwargs)  # written, then the unit fails: all of it rolls back
        raise StorageError("disk I/O error", "io")

    monkeypatch.setattr(admission_service.outcomes, "begun", failing)
    with pytest.raises(StorageError):
        await admit(parts, "lost")
    assert await row_of(parts, "lost") is None
    assert await events(parts) == []
    assert parts.scheduler.running == {} and not parts.turns.running
    monkeypatch.undo()
    # the slot was given back: the same input, submitted again, runs
    again = await admit(parts, "lost")
    assert again["status"] == "started"
    await asyncio.wait_for(parts.turns.wait(SID, again["admission_id"], 10), 10)
    assert (await row_of(parts, "lost"))["outcome"] == "completed"


async def test_a_stop_while_that_commit_is_in_flight_still_ends_the_turn(parts, monkeypatch):
    writer = parts.db._writer
    commit = writer.commit
    monkeypatch.setattr(writer, "loop_commit_units", 0)  # the commit parks on its thread
    entered, gate = threading.Event(), threading.Event()

    def parked() -> None:
        entered.set()
        gate.wait(10)
        commit()

    monkeypatch.setattr(writer, "commit", parked)
    submitted = asyncio.ensure_future(admit(parts, "late"))
    assert await asyncio.to_thread(entered.wait, 10)
    monkeypatch.setattr(writer, "commit", commit)
    parts.supervisor.draining = True  # the stop begins while the commit is in flight
    stopping = asyncio.ensure_future(parts.turns.stop_all(grace=0))
    await asyncio.sleep(0.05)
    assert not stopping.done()  # it waits for the writes in flight first
    gate.set()
    receipt = await submitted
    assert receipt["status"] == "started"
    await asyncio.wait_for(stopping, 10)
    row = await row_of(parts, "late")
    assert row["status"] == "terminal" and row["outcome"] in ("completed", "interrupted")
    assert not parts.turns.running and parts.scheduler.running == {}
