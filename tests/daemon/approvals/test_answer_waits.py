"""An answer to an approval prompt whose turn ends while the answer's unit waits
for PostgreSQL (the loop runs other work meanwhile: store/pg/suspend.py)
approves nothing: no rule is remembered, and the prompt ends as the turn's
stop leaves it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pgstore
import psycopg
import pytest

from tether.daemon.approvals.service import ApprovalCall, ApprovalService
from tether.daemon.config.core import ApprovalsConfig
from tether.daemon.ledger.events import EventBus
from tether.daemon.ledger.journal import Journal
from tether.daemon.ledger.scheduler import Scheduler
from tether.store.pg import PgDatabase


@pytest.fixture
async def store() -> AsyncIterator[tuple[str, Journal]]:
    with pgstore.fresh_schema() as url:
        db = await PgDatabase.open(url, readers=1)
        journal = Journal(db, EventBus())
        try:
            await journal.write(lambda tx: tx.conn.execute(
                "INSERT INTO sessions(session_id, options_json, created_at, updated_at) "
                "VALUES ('s', '{}', 0, 0)"))
            yield url, journal
        finally:
            await db.close()


async def _until(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    deadline = time.monotonic() + 10
    while not (found := pgstore.rows(url, sql, *args)):
        assert time.monotonic() < deadline, sql
        await asyncio.sleep(0.02)
    return found


async def test_an_answer_whose_turn_ended_during_its_wait_approves_nothing(store):
    url, journal = store
    service = ApprovalService(journal, Scheduler(max_running=4),
                              SimpleNamespace(draining=False),  # type: ignore[arg-type]
                              ApprovalsConfig(mode="ask"), epoch=1)
    call = ApprovalCall("s", None, "call_1", "terminal", "/tmp", attended=True)
    turn = asyncio.create_task(service.check(call, "command", "rm -rf build"))
    ((approval_id,),) = await _until(url, "SELECT approval_id FROM approvals "
                                          "WHERE status = 'pending'")
    with psycopg.connect(url, autocommit=True) as locker:
        locker.execute("BEGIN")
        locker.execute("SELECT 1 FROM approvals WHERE approval_id = %s FOR UPDATE",
                       (approval_id,))
        answer = asyncio.create_task(
            service.respond("s", approval_id, "always", None, "tester"))
        await _until(url, "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                          "AND query LIKE 'UPDATE approvals SET status%'")
        turn.cancel()  # the turn is stopped while the answer waits for the row
        with pytest.raises(asyncio.CancelledError):
            await turn
        locker.execute("ROLLBACK")
        out = await asyncio.wait_for(answer, 10)
    assert out["status"] == "already_resolved"
    ((status, cause),) = await _until(url, "SELECT status, cause FROM approvals "
                                           "WHERE approval_id = ? AND status != 'pending'",
                                      approval_id)
    assert (status, cause) == ("cancelled", "interrupted")
    assert pgstore.rows(url, "SELECT COUNT(*) FROM approval_rules") == [(0,)]


async def test_an_answer_to_a_waiting_turn_approves_it(store):
    url, journal = store
    service = ApprovalService(journal, Scheduler(max_running=4),
                              SimpleNamespace(draining=False),  # type: ignore[arg-type]
                              ApprovalsConfig(mode="ask"), epoch=1)
    call = ApprovalCall("s", None, "call_1", "terminal", "/tmp", attended=True)
    turn = asyncio.create_task(service.check(call, "command", "rm -rf build"))
    ((approval_id,),) = await _until(url, "SELECT approval_id FROM approvals "
                                          "WHERE status = 'pending'")
    out = await service.respond("s", approval_id, "always", None, "tester")
    assert out["status"] == "resolved"
    verdict = await asyncio.wait_for(turn, 10)
    assert verdict.allowed
    assert pgstore.rows(url, "SELECT COUNT(*) FROM approval_rules") == [(1,)]
