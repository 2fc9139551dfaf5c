"""The one late-delivery rule (daemon/ledger/delivery.py), on the real ledger and state.db.

One producer's rows (the `processes` table, with notices due) are delivered
through `LateDelivery` by the owner's real `AdmissionService.admit`: exactly
once however often and however concurrently it is asked, after a crash between
recording a row and delivering it, and never again after a delivery that
committed. `claim` / `announce_once` (cron's event-only delivery) undo their
whole unit when the row was delivered already.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from tether.daemon.ledger.delivery import (
    AlreadyDelivered,
    LateDelivery,
    Letter,
    announce_once,
    claim,
    recover,
)
from tether.daemon.ledger.rules import TURN_OPTION_KEY, canonical_payload, encode_payload
from tether.store.tables import admissions, events
from tether.store.tables import processes as rows

SID = "ses_late"


def _letter(row: dict[str, Any]) -> Letter:
    def announce(tx: Any, admission_id: str | None) -> None:
        tx.event(row["session_id"], "process.complete",
                 {"process_id": row["process_id"], "state": row["state"],
                  "exit_code": row["exit_code"], "command": row["command"],
                  "admission_id": admission_id})

    return Letter(row["session_id"], f"done: {row['process_id']}",
                  {"process_id": row["process_id"]}, announce)


def _late(parts: Any) -> LateDelivery:
    return LateDelivery(parts.journal, parts.supervisor, parts.admissions.admit,
                        principal="process", what="test row", get=rows.get,
                        mark=rows.mark_delivered, origin_column="admission_id",
                        letter=_letter)


async def _start(parts: Any, process_id: str, *, finished: bool = True,
                 admission_id: str | None = None) -> None:
    """A producer's row, notice due; finished unless told otherwise. The session's
    queue is held (as behind an unknown admission), so no follow-up turn runs."""
    if admission_id is None:
        await parts.new_session(SID)
        parts.scheduler.block(SID, "adm_unknown")

    def unit(c: Any) -> None:
        rows.insert(c, process_id=process_id, session_id=SID, admission_id=admission_id,
                    command="make", cwd=None, notify=True, owner_epoch=parts.epoch, now=1.0)
        if finished:
            rows.finish(c, process_id, "exited", 0, "ok", 2.0)

    await parts.db.write(unit)


async def _delivered(parts: Any, process_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """(follow-up admissions, announcing events, the row's delivery state)."""
    def read(c: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
        follow = [a for a in admissions.open_for_session(c, SID)
                  if (a["principal_id"], a["request_id"]) == ("process", process_id)]
        notes = [orjson.loads(p) for p in events.payloads_of_type(c, SID, "process.complete")]
        return follow, notes, rows.get(c, process_id)["delivery_state"]

    return await parts.db.read(read)


async def test_a_row_is_delivered_once_however_often_and_concurrently_asked(wire):
    async with wire({}, epoch=1) as parts:
        await _start(parts, "proc_a")
        late = _late(parts)
        await asyncio.gather(*(late.deliver("proc_a") for _ in range(4)))
        await late.deliver("proc_a")
        follow, notes, state = await _delivered(parts, "proc_a")
    assert state == "delivered"
    [adm] = follow
    assert orjson.loads(adm["payload_json"]) == {"text": "done: proc_a", "finite": False,
                                                 "process_id": "proc_a"}
    # the announcing event is written once, in the unit that admitted the follow-up
    assert notes == [{"process_id": "proc_a", "state": "exited", "exit_code": 0,
                      "command": "make", "admission_id": adm["admission_id"]}]


async def test_a_row_still_running_is_not_delivered(wire):
    async with wire({}, epoch=1) as parts:
        await _start(parts, "proc_run", finished=False)
        await _late(parts).deliver("proc_run")
        follow, notes, state = await _delivered(parts, "proc_run")
    assert (follow, notes, state) == ([], [], "pending")


async def test_a_crash_between_recording_and_delivering_is_delivered_once_at_the_next_start(
        wire):
    # the first owner records the end and dies before delivering
    async with wire({}, epoch=1) as parts:
        await _start(parts, "proc_crash", finished=False)
        await _late(parts).finish("proc_crash", lambda tx: rows.finish(
            tx.conn, "proc_crash", "exited", 3, "tail", tx.now), deliver=False)
        assert (await _delivered(parts, "proc_crash"))[2] == "pending"
    # the next owner's start: recovery delivers it, a second pass adds nothing
    async with wire({}, epoch=2) as parts:
        parts.scheduler.block(SID, "adm_unknown")
        late = _late(parts)
        ended: list[str] = []

        def finish_orphans(tx: Any) -> None:
            ended.extend(r["process_id"] for r in rows.running_before(tx.conn, 2))

        await late.recover(finish_orphans, rows.undelivered, "process_id")
        await late.recover(finish_orphans, rows.undelivered, "process_id")
        follow, notes, state = await _delivered(parts, "proc_crash")
    assert ended == []  # it had finished: nothing left running to end
    assert (len(follow), len(notes), state) == (1, 1, "delivered")
    assert notes[0]["exit_code"] == 3


async def test_a_delivery_that_committed_is_not_repeated_after_a_restart(wire):
    async with wire({}, epoch=1) as parts:
        await _start(parts, "proc_done")
        await _late(parts).deliver("proc_done")
    async with wire({}, epoch=2) as parts:
        parts.scheduler.block(SID, "adm_unknown")
        late = _late(parts)
        await late.recover(lambda tx: None, rows.undelivered, "process_id")
        await late.deliver("proc_done")  # asked again by hand: still nothing new
        follow, notes, state = await _delivered(parts, "proc_done")
    assert (len(follow), len(notes), state) == (1, 1, "delivered")


async def test_the_follow_up_runs_with_the_origin_turns_options(wire):
    async with wire({}, epoch=1) as parts:
        await parts.new_session(SID)
        parts.scheduler.block(SID, "adm_unknown")
        origin = await parts.admissions.admit("local", SID, "in_1", encode_payload(
            canonical_payload("start it", False, {"model": "other-model"})), internal=True)
        await _start(parts, "proc_opt", admission_id=origin["admission_id"])
        await _late(parts).deliver("proc_opt")
        [adm] = (await _delivered(parts, "proc_opt"))[0]
    assert orjson.loads(adm["payload_json"])[TURN_OPTION_KEY] == {"model": "other-model"}


async def test_a_claim_that_finds_the_row_delivered_undoes_its_whole_unit(wire):
    async with wire({}, epoch=1) as parts:
        await _start(parts, "proc_claim")

        def unit(tx: Any) -> None:
            tx.event(SID, "cron.notice", {"n": 1})  # written first, undone with the unit
            claim(tx, lambda c, now: rows.mark_delivered(c, "proc_claim", now))
            tx.event(SID, "cron.notice", {"n": 2})

        assert await announce_once(parts.journal, unit, "a test notice") is True
        assert await announce_once(parts.journal, unit, "a test notice") is False
        with pytest.raises(AlreadyDelivered):
            await parts.journal.write(unit)
        notes = await parts.db.read(
            lambda c: [orjson.loads(p) for p in events.payloads_of_type(c, SID, "cron.notice")])
    assert notes == [{"n": 1}, {"n": 2}]


async def test_recovery_goes_on_past_a_row_that_fails(wire):
    async with wire({}, epoch=1) as parts:
        await _start(parts, "proc_1")
        await parts.db.write(lambda c: (
            rows.insert(c, process_id="proc_2", session_id=SID, admission_id=None,
                        command="make", cwd=None, notify=True, owner_epoch=1, now=3.0),
            rows.finish(c, "proc_2", "exited", 1, "", 4.0)))
        late = _late(parts)
        seen: list[str] = []

        async def on_due(row: dict[str, Any]) -> None:
            seen.append(row["process_id"])
            if row["process_id"] == "proc_1":
                raise RuntimeError("this row cannot be delivered now")
            await late.deliver(row["process_id"])

        await recover(parts.journal, "test rows", "process_id", rows.undelivered, on_due)
        first, second = (await _delivered(parts, "proc_1")), (await _delivered(parts, "proc_2"))
    assert seen == ["proc_1", "proc_2"]
    assert first[2] == "pending" and first[0] == []  # left for the next start
    assert second[2] == "delivered" and len(second[0]) == 1
