"""Storage faults against the real owner: a locked, full or read-only state.db.

The caller of a write gets ``storage_unavailable`` (with ``data.storage_reason``),
nothing half-written stays behind, reads keep being served, and once the fault
clears the owner carries on by itself: a retried input_id is admitted exactly
once and a turn whose writes failed still records its outcome.

Injections, all real SQLite failures on the owner's own writer connection:
- locked: this test process holds ``BEGIN EXCLUSIVE`` on state.db past
  ``daemon.busy_timeout_ms``;
- full: the ``daemon.max_db_bytes`` quota (``PRAGMA max_page_count``), lifted by
  a restart; or the storage fault hook (``TETHER_FAULT_STORAGE``, tests/faults.py)
  capping the file at its current size while the owner runs;
- read-only: the same hook switching the writer to ``PRAGMA query_only`` (root
  ignores file modes, so chmod could not do it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, prompt_of, text_reply
from harness import OwnerProcess, Peer, clean_env, db_rows, until, write_config

# the faults are SQLite's own: another process's lock on state.db, a page quota, a
# read-only file (PostgreSQL's failures: tests/fleet/test_pg_store.py)
pytestmark = pytest.mark.sqlite_only


def table_counts(home: Path) -> dict[str, int]:
    tables = [r[0] for r in db_rows(home, "SELECT name FROM sqlite_master WHERE type='table'")]
    return {t: db_rows(home, f'SELECT COUNT(*) FROM "{t}"')[0][0] for t in tables}


def rows_for(home: Path, input_id: str) -> int:
    return db_rows(home, "SELECT COUNT(*) FROM session_admissions WHERE request_id = ?",
                   input_id)[0][0]


def storage_error(reply: dict[str, Any], reason: str) -> None:
    assert "error" in reply, reply
    err = reply["error"]
    assert err["message"] == "storage_unavailable" and err["code"] == -32013, err
    assert err["data"]["storage_reason"] == reason, err


async def reads_are_served(peer: Peer, sid: str) -> None:
    """What a viewer does while the writer is failing: all of it still works."""
    assert (await peer.result("ping")) == {"pong": True}
    assert any(s["session_id"] == sid
               for s in (await peer.result("session.list", limit=500))["sessions"])
    snap = await peer.result("session.resume", session_id=sid, after_seq=0)
    assert snap["session_id"] == sid
    since = await peer.result("session.events.since", session_id=sid, after_seq=0)
    assert since["last_seq"] == snap["last_seq"]


@contextlib.contextmanager
def exclusive_lock(home: Path):
    """Another process's write transaction on state.db, held until the block ends."""
    db = sqlite3.connect(home / "state.db", isolation_level=None, timeout=10)
    try:
        db.execute("BEGIN EXCLUSIVE")
        yield
        db.execute("ROLLBACK")
    finally:
        db.close()


async def test_locked_database_then_the_retry_is_admitted_once(scene):
    async with scene(lambda req: text_reply("LOCK_DONE"), daemon={"busy_timeout_ms": 200}) as s:
        home, peer, sid = s.home, s.peer, s.session_id
        before = table_counts(home)
        with exclusive_lock(home):
            reply = await peer.call("prompt.submit", session_id=sid, input_id="in-1",
                                    text="hello")
            storage_error(reply, "database_locked")
            storage_error(await peer.call("session.create", title="no"),
                          "database_locked")
            await reads_are_served(peer, sid)
            missing = await peer.call("prompt.receipt", session_id=sid, input_id="in-1")
            assert missing["error"]["message"] == "not_found"
        assert table_counts(home) == before, "a refused write left a row"

        receipt = await peer.result("prompt.submit", session_id=sid, input_id="in-1",
                                    text="hello")
        done = await peer.wait_terminal(sid, receipt["admission_id"])
        assert done["outcome"] == "completed"
        assert done["result"]["text"] == "LOCK_DONE"
        assert rows_for(home, "in-1") == 1


async def test_quota_full_refuses_whole_units_and_a_bigger_quota_recovers(tmp_path):
    """``daemon.max_db_bytes``: at the quota every write is disk_full, nothing of a
    refused unit (admission row or its event) is stored; restarted with room, the
    same input_id is admitted and runs."""
    home = tmp_path / "home"
    with FakeProvider(lambda req: text_reply("QUOTA_DONE")) as provider:
        write_config(home, provider.url, daemon={"max_db_bytes": 384 * 1024})
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create"))["session_id"]
                await peer.result("session.detach", session_id=sid)
                # fill the file with sessions (no turns run) until the quota refuses one
                for i in range(1000):
                    reply = await peer.call("session.create", cwd=f"/{i}/" + "d" * 4000)
                    if "error" in reply:
                        storage_error(reply, "disk_full")
                        break
                    await peer.result("session.detach", session_id=reply["result"]["session_id"])
                else:
                    raise AssertionError("the quota never filled")
                before = table_counts(home)
                for text in ("x" * 20_000, "short"):
                    reply = await peer.call("prompt.submit", session_id=sid, input_id="in-1",
                                            text=text)
                    if "error" in reply:
                        storage_error(reply, "disk_full")
                        break
                else:
                    raise AssertionError("a full database admitted a prompt")
                assert table_counts(home) == before, "a refused unit left a row"
                await reads_are_served(peer, sid)

        write_config(home, provider.url, daemon={"max_db_bytes": 64 * 1024 * 1024})
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                receipt = await peer.result("prompt.submit", session_id=sid, input_id="in-1",
                                            text=text)
                done = await peer.wait_terminal(sid, receipt["admission_id"])
                assert done["outcome"] == "completed"
                assert rows_for(home, "in-1") == 1


async def test_disk_full_mid_group_acknowledges_exactly_what_was_stored(tmp_path):
    """Concurrent submissions share one group commit. When the file fills in the
    middle of it, SQLite rolls the whole transaction back: every submission must
    be answered by what is actually stored (a receipt iff a row), and once the
    disk has room again the refused ones are admitted by a plain retry."""
    home = tmp_path / "home"
    fault = tmp_path / "storage-fault"
    gate = threading.Event()

    def answer(req: dict) -> Any:
        gate.wait(60)
        return text_reply("FULL_DONE")

    with FakeProvider(answer) as provider:
        write_config(home, provider.url)
        env = clean_env(home, TETHER_FAULT_STORAGE=str(fault))
        with OwnerProcess(home, env=env):
            async with await Peer.connect(home) as peer:
                sids = [(await peer.result("session.create"))["session_id"] for _ in range(8)]
                fault.write_text("full")
                batch = [{"jsonrpc": "2.0", "id": i, "method": "prompt.submit",
                          "params": {"session_id": sids[i % 8], "input_id": f"in-{i}",
                                     "text": f"{i}:" + "t" * (500 + 300 * i)}}
                         for i in range(40)]
                await peer.send_raw(json.dumps(batch))
                for _ in range(1000):
                    if peer.other:
                        break
                    await asyncio.sleep(0.02)
                [replies] = peer.other
                by_id = {r["id"]: r for r in replies}
                refused = []
                for i in range(40):
                    reply, input_id = by_id[i], f"in-{i}"
                    if "result" in reply:
                        assert rows_for(home, input_id) == 1, f"{input_id} acknowledged, not stored"
                    else:
                        storage_error(reply, "disk_full")
                        assert rows_for(home, input_id) == 0, f"{input_id} refused, yet stored"
                        refused.append(i)
                assert refused, "the disk never filled"
                await reads_are_served(peer, sids[0])

                fault.write_text("")  # room again: the owner recovers by itself
                for i in refused:
                    await peer.result("prompt.submit", **batch[i]["params"])
                gate.set()
                for i in range(40):
                    receipt = await peer.result("prompt.receipt", session_id=sids[i % 8],
                                                input_id=f"in-{i}")
                    done = await peer.wait_terminal(sids[i % 8], receipt["admission_id"],
                                                    timeout=60)
                    assert done["outcome"] == "completed", done
                    assert rows_for(home, f"in-{i}") == 1


async def test_read_only_store_keeps_a_turns_outcome_until_it_can_be_written(tmp_path):
    """The store turns read-only while a turn runs, for longer than the turn rides
    out (``store.outage_seconds``): its writes fail, and the turn ends failed, but
    its outcome is kept (the receipt says started, the session's queue waits) and
    recorded as soon as the store takes writes again; meanwhile new writes are
    refused with read_only and reads are served."""
    home = tmp_path / "home"
    fault = tmp_path / "storage-fault"
    gate = threading.Event()

    def answer(req: dict) -> Any:
        gate.wait(60)
        return text_reply("RO_DONE")

    with FakeProvider(answer) as provider:
        write_config(home, provider.url, store={"outage_seconds": 1})
        env = clean_env(home, TETHER_FAULT_STORAGE=str(fault))
        with OwnerProcess(home, env=env):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create"))["session_id"]
                first = await peer.result("prompt.submit", session_id=sid, input_id="a",
                                          text="first")
                second = await peer.result("prompt.submit", session_id=sid, input_id="b",
                                           text="second")
                await peer.wait_event(lambda e: e["type"] == "message.start")
                fault.write_text("readonly")
                storage_error(await peer.call("prompt.submit", session_id=sid, input_id="c",
                                              text="third"), "read_only")
                gate.set()  # the first turn ends now, and cannot write a thing
                # longer than any fixed retry budget: the outcome must still not be lost
                for _ in range(25):
                    await reads_are_served(peer, sid)
                    receipt = await peer.result("prompt.receipt", session_id=sid,
                                                admission_id=first["admission_id"])
                    assert receipt["status"] == "started"
                    await asyncio.sleep(0.2)
                assert rows_for(home, "c") == 0
                # a stop now has nothing to stop, and must not cut the outcome's retries
                # short (that left the admission started, unknown after a restart)
                stop = await peer.result("session.interrupt", session_id=sid)
                assert stop["interrupted"] is False
                # a cancel that cannot be recorded leaves the queued prompt queued, in
                # its place (it used to leave the queue without being settled)
                storage_error(await peer.call("prompt.cancel", session_id=sid,
                                              admission_id=second["admission_id"]),
                              "read_only")

                fault.write_text("")
                done = await peer.wait_terminal(sid, first["admission_id"], timeout=30)
                assert done["outcome"] == "failed"
                error = done["result"]["error"]
                assert error.startswith("storage_unavailable: SQLite database "), error
                assert "for 1 s (store.outage_seconds)" in error, error  # names the deadline
                assert done["result"]["text"] == "RO_DONE"  # what the model said is kept
                # the queue carries on, and the refused prompt is admitted by a retry
                nxt = await peer.wait_terminal(sid, second["admission_id"], timeout=30)
                assert nxt["outcome"] == "completed"
                third = await peer.result("prompt.submit", session_id=sid, input_id="c",
                                          text="third")
                assert (await peer.wait_terminal(sid, third["admission_id"]))["outcome"] == \
                    "completed"
                assert [rows_for(home, x) for x in "abc"] == [1, 1, 1]
                # the viewer saw the outcome as an event too
                await peer.wait_event(lambda e: e["type"] == "message.complete"
                                      and e["admission_id"] == first["admission_id"])


@pytest.mark.parametrize("mode", ["readonly", "locked"])
async def test_a_turn_rides_out_a_store_that_refuses_writes_for_a_while(tmp_path, mode):
    """The store refuses writes (read-only, or locked by another process past
    ``daemon.busy_timeout_ms``) after the model answered, for less than
    ``store.outage_seconds``: the turn's writes wait, and it completes once the
    store heals, its answer and events stored once, in order."""
    home = tmp_path / "home"
    fault = tmp_path / "storage-fault"
    gate = threading.Event()

    def answer(req: dict) -> Any:
        gate.wait(60)
        return text_reply(f"answer to {prompt_of(req)}")

    with FakeProvider(answer) as provider:
        write_config(home, provider.url, daemon={"busy_timeout_ms": 200})
        with OwnerProcess(home, env=clean_env(home, TETHER_FAULT_STORAGE=str(fault))):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create"))["session_id"]
                first = await peer.result("prompt.submit", session_id=sid, input_id="a",
                                          text="first")
                await peer.wait_event(lambda e: e["type"] == "message.start")
                with contextlib.ExitStack() as fault_on:
                    if mode == "locked":
                        fault_on.enter_context(exclusive_lock(home))
                    else:
                        fault.write_text(mode)
                    gate.set()  # the model answers into a store that refuses it
                    await until(lambda: provider.answered >= 1, "the model to answer")
                    await asyncio.sleep(1.5)
                    receipt = await peer.result("prompt.receipt", session_id=sid,
                                                admission_id=first["admission_id"])
                    assert receipt["status"] == "started"  # waiting, not failed
                    fault.write_text("")
                done = await peer.wait_terminal(sid, first["admission_id"], timeout=30)
                assert done["outcome"] == "completed", done
                assert done["result"]["text"] == "answer to first"
                events = await peer.all_events(sid)
                assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
                kinds = [e["type"] for e in events if e.get("admission_id")]
                assert kinds.count("message.start") == kinds.count("message.complete") == 1
                assert kinds[-1] == "message.complete"
    assert len(provider.requests) == 1  # the model was asked once
    roles = [r[0] for r in db_rows(home, "SELECT role FROM messages WHERE session_id = ? "
                                         "ORDER BY idx", sid)]
    assert roles == ["user", "assistant"]


async def test_a_background_delegation_survives_a_brief_lock_and_is_delivered(scene):
    """Both children of a background delegation answer while another process holds
    state.db locked for 2 s (past busy_timeout_ms): once the lock is gone the same
    owner records their results and delivers them, without a restart."""
    from tether.daemon.delegation.tasks import RESULTS_PREFIX

    gate = threading.Event()
    answered: list[str] = []

    def model(req: dict) -> Any:
        from fakeprovider import is_child, tool_call_reply
        last = req["messages"][-1]
        if is_child(req):
            goal = req["messages"][1]["content"]
            gate.wait(30)
            answered.append(goal)
            return text_reply(f"SUMMARY OF {goal}")
        if last["role"] == "user" and last["content"].startswith(RESULTS_PREFIX):
            both = "SUMMARY OF ALPHA" in last["content"] and "SUMMARY OF BETA" in last["content"]
            return text_reply("BOTH_DELIVERED" if both else "RESULTS_INCOMPLETE")
        if last["role"] == "tool":
            return text_reply("DISPATCHED")
        return tool_call_reply("delegate_task", {"tasks": [{"goal": "ALPHA"},
                                                           {"goal": "BETA"}]})

    async with scene(model, daemon={"busy_timeout_ms": 300}) as s:
        home, peer, sid = s.home, s.peer, s.session_id
        first = await peer.result("prompt.submit", session_id=sid, input_id="go",
                                  text="fan out")
        assert (await peer.wait_terminal(sid, first["admission_id"]))["outcome"] == "completed"
        with exclusive_lock(home):
            gate.set()
            while len(answered) < 2:
                await asyncio.sleep(0.05)
            await asyncio.sleep(2.0)  # both answered; the owner's writes are refused

        async def delivered() -> dict[str, Any] | None:
            rows = db_rows(home, "SELECT admission_id FROM session_admissions "
                                 "WHERE principal_id = 'delegation'")
            if not rows:
                return None
            done = await peer.call("prompt.receipt", session_id=sid, admission_id=rows[0][0])
            return done["result"] if done["result"]["status"] == "terminal" else None

        deadline = asyncio.get_running_loop().time() + 30
        receipt = None
        while receipt is None and asyncio.get_running_loop().time() < deadline:
            receipt = await delivered()
            await asyncio.sleep(0.2)
        assert receipt is not None, "the delegation was not delivered after the lock"
        assert receipt["result"]["text"] == "BOTH_DELIVERED"
        row = db_rows(home, "SELECT state, delivery_state FROM async_delegations")
        assert [tuple(r) for r in row] == [("completed", "delivered")]
