"""TurnRunner with a real store and an instant model: a turn stopped in the same
loop step that started it (its task has not taken a first step yet).

A task cancelled before its first step never runs its body, not even ``finally``,
so such a stop used to leave the session "running" for good: its queue stalled and
shutdown waited forever. Over the wire this needs a race (an interrupt whose
handler resumes between the scheduler handing out the turn and the turn's first
step); here the two calls are made back to back, so it happens every time.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest
from wiring import Parts

from tether.bench import InstantProvider
from tether.daemon.ledger import rules as ledger
from tether.store.tables import admissions as admission_rows

SID = "ses_000000000000000000000001"


class CrashingProvider:
    """A provider with a bug: raises what no provider should."""

    name = "crashing"

    async def complete(self, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in a provider")


@pytest.fixture
def provider() -> Any:
    return InstantProvider()


@pytest.fixture
async def runner(wire, provider: Any) -> Any:
    async with wire({"demo": provider}) as parts:
        await parts.new_session(SID)
        yield parts, parts.turns


async def admit(rt: Parts, input_id: str) -> str:
    payload = ledger.encode_payload(ledger.canonical_payload(input_id, True, {}, None))
    row = await rt.db.write(lambda c: admission_rows.insert_new(
        c, admission_id=f"adm_{input_id}", target_session_id=SID, principal_id="local",
        request_id=input_id, payload_json=payload, payload_digest=ledger.digest(payload),
        owner_epoch=1, now=1.0))
    assert row is not None
    rt.scheduler.enqueue(SID, row["admission_id"])
    return row["admission_id"]


async def status(rt: Parts, admission_id: str) -> tuple[str, str | None]:
    row = await rt.db.read(lambda c: admission_rows.get(c, admission_id))
    assert row is not None
    return row["status"], row["outcome"]


async def test_a_turn_cancelled_before_its_first_step_is_settled_and_the_queue_goes_on(runner):
    rt, turns = runner
    first = await admit(rt, "first")
    turns.pump()
    assert turns.stop(SID, "cancelled") == first  # same step: the task has not run yet
    await asyncio.wait_for(turns.wait(SID, first, 10), 10)
    assert await status(rt, first) == ("terminal", "cancelled")
    assert SID not in turns.running and SID not in rt.scheduler.running

    second = await admit(rt, "second")  # the session is free: the next turn runs
    turns.pump()
    await asyncio.wait_for(turns.wait(SID, second, 10), 10)
    assert await status(rt, second) == ("terminal", "completed")


async def test_shutdown_after_such_a_stop_does_not_wait_forever(runner):
    rt, turns = runner
    aid = await admit(rt, "late")
    turns.pump()
    turns.stop(SID, "cancelled")
    rt.supervisor.draining = True
    await asyncio.wait_for(turns.stop_all(grace=0), 10)
    assert await status(rt, aid) == ("terminal", "cancelled")
    assert not turns.running


@pytest.mark.parametrize("provider", [CrashingProvider()])
async def test_a_turn_that_crashes_is_recorded_failed_not_left_started(runner):
    rt, turns = runner
    aid = await admit(rt, "boom")
    turns.pump()
    await asyncio.wait_for(turns.wait(SID, aid, 10), 10)
    assert await status(rt, aid) == ("terminal", "failed")
    row = await rt.db.read(lambda c: admission_rows.get(c, aid))
    assert "internal_error: the turn crashed (RuntimeError)" in row["result_json"]
    assert SID not in turns.running


# -- a turn's end is one commit ----------------------------------------------------


async def transcript(rt: Parts) -> list[tuple[str, str | None]]:
    rows = await rt.db.read(lambda c: c.execute(
        "SELECT role, content FROM messages WHERE session_id = ? ORDER BY idx",
        (SID,)).fetchall())
    return [(r[0], r[1]) for r in rows]


async def event_types(rt: Parts, admission_id: str) -> list[str]:
    rows = await rt.db.read(lambda c: c.execute(
        "SELECT type FROM events WHERE session_id = ? AND admission_id = ? ORDER BY seq",
        (SID, admission_id)).fetchall())
    return [r[0] for r in rows]


async def test_an_answered_turn_is_two_commits_its_start_and_its_end(runner):
    """The streamed text, the answer's transcript row and the outcome are written
    in one unit: a turn that asks the model once commits twice."""
    rt, turns = runner
    aid = await admit(rt, "one answer")
    before = rt.db.commits
    turns.pump()
    await asyncio.wait_for(turns.wait(SID, aid, 10), 10)
    assert rt.db.commits - before == 2
    assert await status(rt, aid) == ("terminal", "completed")
    assert [role for role, _ in await transcript(rt)] == ["user", "assistant"]
    kinds = await event_types(rt, aid)
    assert kinds[0] == "message.start" and kinds[-1] == "message.complete"
    assert "message.delta" in kinds[1:-1]


async def test_an_end_the_store_refuses_is_written_later_once_in_order(runner):
    """The end's unit refused (a transient failure of the store): the deltas, then
    the answer with the outcome, are written once each when the store takes them."""
    rt, turns = runner
    aid = await admit(rt, "refused end")
    groups = 0

    def refuse_the_end(conn: Any) -> None:
        nonlocal groups
        groups += 1
        if groups == 2:  # the first group is the turn's start; the second its end
            raise sqlite3.OperationalError("attempt to write a readonly database")

    rt.db.before_group = refuse_the_end
    turns.pump()
    await asyncio.wait_for(turns.wait(SID, aid, 30), 30)
    assert groups > 2  # the end was written again after its refusal
    assert await status(rt, aid) == ("terminal", "completed")
    assert await transcript(rt) == [("user", "refused end"), ("assistant", "ok")]
    kinds = await event_types(rt, aid)
    assert kinds.count("message.complete") == 1 and kinds[-1] == "message.complete"
    assert kinds.count("message.delta") == 1
    assert kinds.index("message.delta") < kinds.index("message.complete")
