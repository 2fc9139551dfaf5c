"""The crash suite: the real owner killed with SIGKILL mid-work, then restarted on the
same home (SPEC §4, §5, §7; docs/recovery.md).

After every restart: each receipt a client received is in the ledger unchanged;
admissions that had started are ``unknown`` and are never run again (the fake model
counts requests per prompt); queued work runs to terminal; ``PRAGMA
integrity_check`` is ok; retrying any input_id answers its receipt; resolving the
unknown admissions lets their sessions' queues continue.

``TETHER_CRASH_SEEDS`` (default 3) sets how many seeded kill points the burst test
tries; a long run uses 40 or more.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sqlite3
import threading
import time
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, Status, is_child, prompt_of, text_reply, tool_call_reply
from harness import OwnerProcess, Peer, clean_env, db_dicts, until, write_config
from websockets.exceptions import ConnectionClosed

from tether.daemon.delegation.tasks import RESULTS_PREFIX

# what a client sees when the owner dies under it
LOST = (OSError, TimeoutError, ConnectionClosed)


def unanswered_tool_calls(messages: list[dict]) -> list[str]:
    """Tool calls with no ``role=tool`` reply right after their assistant message:
    OpenAI-compatible servers refuse such a history with 400."""
    missing = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant" or not m.get("tool_calls"):
            continue
        replies = set()
        for later in messages[i + 1:]:
            if later["role"] != "tool":
                break
            replies.add(later["tool_call_id"])
        missing += [c["id"] for c in m["tool_calls"] if c["id"] not in replies]
    return missing


def refuse_bad_history(req: dict) -> Status | None:
    missing = unanswered_tool_calls(req["messages"])
    if not missing:
        return None
    return Status(400, '{"error": {"message": "An assistant message with tool_calls must be '
                       'followed by tool messages responding to each tool_call_id: '
                       + ", ".join(missing) + '", "type": "invalid_request_error"}}')


class Model:
    """A fake model that counts requests per prompt. Prompts starting with HOLD wait
    on ``gate`` (a turn blocked in the provider); others answer after ``delay``."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.gate = threading.Event()
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def asked(self, prefix: str) -> int:
        with self._lock:
            return sum(n for text, n in self.counts.items() if text.startswith(prefix))

    def __call__(self, req: dict) -> Any:
        text = prompt_of(req)
        with self._lock:
            self.counts[text] += 1
        if text.startswith("HOLD"):
            self.gate.wait(60)
        elif self.delay:
            time.sleep(self.delay)
        return text_reply("DONE " + text)


def ledger(home: Path) -> dict[str, dict[str, Any]]:
    """The local admissions, by input_id, read straight from the store."""
    rows = db_dicts(home, "SELECT * FROM session_admissions ORDER BY seq")
    local = {r["request_id"]: r for r in rows if r["principal_id"] == "local"}
    assert len(local) == sum(r["principal_id"] == "local" for r in rows), "duplicate input_id"
    return local


def all_rows(home: Path, sql: str, *args: Any) -> list[dict[str, Any]]:
    return db_dicts(home, sql, *args)


def integrity(home: Path, store_url: str | None) -> str:
    """SQLite's own check of the file; PostgreSQL keeps its files itself."""
    if store_url is not None:
        return "ok"
    with closing(sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0]


def check_event_logs(home: Path) -> None:
    """Each session's event log is gap-free, and every admission (all terminal by now)
    started once and completed once: nothing ran twice, nothing ended silently."""
    for r in all_rows(home, "SELECT session_id, COUNT(*) AS n, MAX(seq) AS last, "
                            "MIN(seq) AS first FROM events GROUP BY session_id"):
        assert (r["first"], r["last"]) == (1, r["n"]), r
    ends = Counter((r["admission_id"], r["type"]) for r in all_rows(
        home, "SELECT admission_id, type FROM events "
              "WHERE type IN ('message.start', 'message.complete')"))
    for row in all_rows(home, "SELECT admission_id, status FROM session_admissions"):
        aid = row["admission_id"]
        assert row["status"] == "terminal", row
        assert (ends[aid, "message.start"], ends[aid, "message.complete"]) == (1, 1), aid


def same_receipt(got: dict[str, Any], want: dict[str, Any]) -> None:
    for key in ("admission_id", "session_id", "input_id"):
        assert got[key] == want[key], (key, got, want)


def matches_row(receipt: dict[str, Any], row: dict[str, Any]) -> None:
    assert row["admission_id"] == receipt["admission_id"], (receipt, row)
    assert row["target_session_id"] == receipt["session_id"], (receipt, row)
    assert row["request_id"] == receipt["input_id"], (receipt, row)


async def retry_all(home: Path, submits: dict[str, tuple[str, str]],
                    refused: set[str] = frozenset()) -> dict[str, dict]:
    """Resubmit every input_id (same payload) over two fresh connections; returns the
    receipts. ``refused`` input_ids must get ``unknown_execution`` instead."""
    items = sorted(submits.items())
    out: dict[str, dict] = {}

    async def one_connection(part: list[tuple[str, tuple[str, str]]]) -> None:
        async with await Peer.connect(home) as peer:
            for iid, (sid, text) in part:
                reply = await peer.call("prompt.submit", session_id=sid, input_id=iid,
                                        text=text)
                if iid in refused:
                    assert reply["error"]["message"] == "unknown_execution", reply
                else:
                    assert "result" in reply, (iid, reply)
                    out[iid] = reply["result"]

    await asyncio.gather(one_connection(items[::2]), one_connection(items[1::2]))
    return out


# -- kill with turns running and admissions queued behind them ---------------------


async def test_kill_during_running_turns(tmp_path, store_url):
    home = tmp_path / "home"
    model = Model()
    owners: list[OwnerProcess] = []
    with FakeProvider(model) as provider:
        write_config(home, provider.url, daemon={"max_running_turns": 3})
        try:
            owners.append(OwnerProcess(home).start())
            submits: dict[str, tuple[str, str]] = {}
            received: dict[str, dict] = {}
            async with await Peer.connect(home) as peer:
                sids = [(await peer.result("session.create", title=f"s{i}"))["session_id"]
                        for i in range(4)]

                async def submit(i: int, iid: str, text: str) -> None:
                    submits[iid] = (sids[i], text)
                    received[iid] = await peer.result("prompt.submit", session_id=sids[i],
                                                      input_id=iid, text=text)

                for i in range(3):
                    await submit(i, f"hold-{i}", f"HOLD turn {i}")
                await until(lambda: model.asked("HOLD") == 3, "three turns in the provider")
                # the running bound is 3: session 3 waits although nothing runs in it
                await submit(3, "free-3", "FREE turn 3")
                for i in range(4):
                    for j in (1, 2):
                        await submit(i, f"q-{i}-{j}", f"QUEUED turn {i}.{j}")
                owners[0].kill()  # SIGKILL, three turns blocked in the provider

            rows = ledger(home)
            assert integrity(home, store_url) == "ok"
            for iid, receipt in received.items():
                matches_row(receipt, rows[iid])
            assert {iid for iid, r in rows.items() if r["status"] == "started"} == {
                "hold-0", "hold-1", "hold-2"}
            assert all(r["status"] == "queued" for iid, r in rows.items()
                       if not iid.startswith("hold"))

            owners.append(OwnerProcess(home).start())
            async with await Peer.connect(home) as peer:
                for iid, receipt in received.items():
                    r = await peer.result("prompt.receipt", session_id=receipt["session_id"],
                                          input_id=iid)
                    same_receipt(r, receipt)
                    if iid.startswith("hold"):
                        assert r["status"] == "unknown"
                retried = await retry_all(home, submits)
                for iid, r in retried.items():
                    same_receipt(r, received[iid])
                assert {iid for iid, r in retried.items() if r["status"] == "unknown"} == {
                    "hold-0", "hold-1", "hold-2"}
                # an unknown admission cannot be cancelled, only resolved
                reply = await peer.call("prompt.cancel", session_id=sids[0],
                                        admission_id=received["hold-0"]["admission_id"])
                assert reply["error"]["message"] == "unknown_execution"

                # session 3 was never started: it runs; sessions 0-2 stay paused
                for iid in ("free-3", "q-3-1", "q-3-2"):
                    done = await peer.wait_terminal(sids[3], received[iid]["admission_id"])
                    assert done["outcome"] == "completed", done
                rows = ledger(home)
                for i in range(3):
                    assert rows[f"hold-{i}"]["status"] == "unknown"
                    for j in (1, 2):
                        assert rows[f"q-{i}-{j}"]["status"] == "queued"
                assert model.asked("QUEUED turn 0") + model.asked("QUEUED turn 1") \
                    + model.asked("QUEUED turn 2") == 0
                # a new prompt for a paused session is refused, naming what to resolve
                reply = await peer.call("prompt.submit", session_id=sids[0], input_id="new-0",
                                        text="NEW turn 0")
                assert reply["error"]["message"] == "unknown_execution", reply
                assert reply["error"]["data"]["admission_ids"] == [
                    received["hold-0"]["admission_id"]]

                for i in range(3):
                    r = await peer.result("prompt.resolve_unknown", session_id=sids[i],
                                          admission_id=received[f"hold-{i}"]["admission_id"])
                    assert (r["status"], r["outcome"]) == ("terminal", "interrupted")
                submits["new-0"] = (sids[0], "NEW turn 0")
                received["new-0"] = await peer.result("prompt.submit", session_id=sids[0],
                                                      input_id="new-0", text="NEW turn 0")
                for iid in ("q-0-1", "q-0-2", "new-0", "q-1-1", "q-1-2", "q-2-1", "q-2-2"):
                    done = await peer.wait_terminal(submits[iid][0],
                                                    received[iid]["admission_id"])
                    assert done["outcome"] == "completed", done
                again = await retry_all(home, submits)
                for iid, r in again.items():
                    same_receipt(r, received[iid])
                    assert r["status"] == "terminal"
            assert owners[1].stop() == 0
        finally:
            model.gate.set()
            for owner in owners:
                owner.kill()
    # every prompt reached the model exactly once: the started ones before the crash,
    # never again after it
    assert all(n == 1 for n in model.counts.values()), model.counts
    assert len(model.counts) == len(submits)
    assert integrity(home, store_url) == "ok"
    check_event_logs(home)


# -- kill in the middle of a burst of concurrent submissions ------------------------

CLIENTS, EACH, SESSIONS = 8, 25, 4
#: kill points tried; a long run sets TETHER_CRASH_SEEDS (e.g. 40)
SEEDS = range(1, 1 + int(os.environ.get("TETHER_CRASH_SEEDS", "3")))


@pytest.mark.parametrize("seed", SEEDS)
async def test_kill_mid_burst(tmp_path, store_url, seed):
    """Eight connections submit 25 prompts each, concurrently, over four sessions; the
    client task that receives the seeded k-th receipt SIGKILLs the owner at once, with
    the other clients' submissions in flight and turns running."""
    rng = random.Random(seed)
    kill_after = rng.randint(10, CLIENTS * EACH - 30)
    home = tmp_path / "home"
    model = Model(delay=0.01)
    owners: list[OwnerProcess] = []
    with FakeProvider(model) as provider:
        write_config(home, provider.url)
        try:
            owners.append(OwnerProcess(home).start())
            async with await Peer.connect(home) as peer:
                sids = [(await peer.result("session.create", title=f"s{i}"))["session_id"]
                        for i in range(SESSIONS)]
            submits = {f"c{c}-{i}": (sids[(c + i) % SESSIONS], f"BURST client {c} submit {i}")
                       for c in range(CLIENTS) for i in range(EACH)}
            received: dict[str, dict] = {}
            pid = owners[0].proc.pid

            async def client(c: int) -> None:
                try:
                    peer = await Peer.connect(home)
                except LOST:
                    return
                try:
                    for i in range(EACH):
                        iid = f"c{c}-{i}"
                        sid, text = submits[iid]
                        try:
                            reply = await peer.call("prompt.submit", timeout=20, session_id=sid,
                                                    input_id=iid, text=text)
                        except LOST:
                            return
                        assert "result" in reply, reply
                        received[iid] = reply["result"]
                        if len(received) == kill_after:
                            os.kill(pid, signal.SIGKILL)
                finally:
                    with contextlib.suppress(*LOST):
                        await peer.close()

            await asyncio.gather(*(client(c) for c in range(CLIENTS)))
            owners[0].kill()  # reap it (and kill it, had the burst not reached kill_after)
            assert len(received) >= kill_after

            assert integrity(home, store_url) == "ok"
            before = ledger(home)
            for iid, receipt in received.items():
                matches_row(receipt, before[iid])
            started = {iid for iid, r in before.items() if r["status"] == "started"}
            queued = {iid for iid, r in before.items() if r["status"] == "queued"}
            paused = {before[iid]["target_session_id"] for iid in started}

            owners.append(OwnerProcess(home).start())
            after = ledger(home)
            for iid in started:
                assert after[iid]["status"] == "unknown", after[iid]
            for iid, row in before.items():
                if row["status"] == "terminal":
                    assert after[iid]["result_json"] == row["result_json"]
            # never committed, for a paused session: refused until the pause is resolved
            refused = {iid for iid, (sid, _) in submits.items()
                       if iid not in before and sid in paused}
            retried = await retry_all(home, submits, refused)
            assert set(retried) == set(submits) - refused
            for iid, r in retried.items():
                if iid in received:
                    same_receipt(r, received[iid])
                if iid in before:
                    matches_row(r, before[iid])
                if iid in started:
                    assert r["status"] == "unknown"

            # sessions with no unknown admission drain; the others stay paused
            def unpaused_done() -> bool:
                rows = ledger(home)
                return all(r["status"] == "terminal" for r in rows.values()
                           if r["target_session_id"] not in paused)

            await until(unpaused_done, "sessions without unknown admissions to drain")
            now = ledger(home)
            for iid, row in now.items():
                if row["target_session_id"] in paused and iid not in started \
                        and row["status"] != "terminal":
                    assert row["status"] == "queued", row
                    assert model.counts[submits[iid][1]] == 0, iid

            async with await Peer.connect(home) as peer:
                for iid in sorted(started):
                    r = await peer.result("prompt.resolve_unknown",
                                          session_id=submits[iid][0],
                                          admission_id=before[iid]["admission_id"])
                    assert (r["status"], r["outcome"]) == ("terminal", "interrupted")
            late = await retry_all(home, {iid: submits[iid] for iid in refused})
            assert set(late) == refused
            await until(lambda: all(r["status"] == "terminal" for r in ledger(home).values()),
                        "every admission to be terminal")
            assert owners[1].stop() == 0
        finally:
            for owner in owners:
                owner.kill()

    final = ledger(home)
    assert set(final) == set(submits)
    for iid, row in final.items():
        text = submits[iid][1]
        if iid in started:
            assert row["outcome"] == "interrupted"
            assert model.counts[text] <= 1, iid  # never requested again
        else:
            assert row["outcome"] == "completed", row
            assert model.counts[text] == 1, iid
        if iid in queued:
            assert row["owner_epoch"] == 2  # queued at the crash, run by the next owner
    assert integrity(home, store_url) == "ok"
    check_event_logs(home)


# -- background delegations ----------------------------------------------------------


class DelegatingModel:
    """Parent prompts delegate two tasks; children answer (or wait on ``gate`` when
    ``hold_children``); the parent's follow-up after dispatch and the turn that
    receives the delivered results answer with text. Counts every kind of request."""

    def __init__(self, hold_children: bool = False) -> None:
        self.hold_children = hold_children
        self.gate = threading.Event()
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, req: dict) -> Any:
        msgs = req["messages"]
        users = [m["content"] for m in msgs if m["role"] == "user"]
        if is_child(req):
            kind = "child:" + users[0].strip()
        elif users[-1].startswith(RESULTS_PREFIX):
            kind = "results"
        elif msgs[-1]["role"] == "tool":
            kind = "after_dispatch"
        else:
            kind = "parent"
        with self.lock:
            self.counts[kind] += 1
        if kind.startswith("child:"):
            if self.hold_children:
                self.gate.wait(60)
            return text_reply(f"SUMMARY OF {kind[6:]}")
        if kind == "parent":
            return tool_call_reply("delegate_task", {"tasks": [{"goal": "ALPHA"},
                                                               {"goal": "BETA"}]})
        if kind == "results":
            return text_reply("RESULTS_SEEN " + ("interrupted" if "interrupted" in users[-1]
                                                 else "completed"))
        return text_reply("DISPATCHED")


def delegation_admissions(home: Path, sid: str) -> list[dict[str, Any]]:
    return all_rows(home, "SELECT * FROM session_admissions WHERE target_session_id = ? "
                          "AND principal_id = 'delegation'", sid)


def delegation_rows(home: Path) -> list[dict[str, Any]]:
    return all_rows(home, "SELECT * FROM async_delegations")


async def start_delegating_turn(home: Path) -> tuple[str, dict]:
    async with await Peer.connect(home) as peer:
        sid = (await peer.result("session.create", title="delegator"))["session_id"]
        receipt = await peer.result("prompt.submit", session_id=sid, input_id="parent",
                                    text="split this in two")
        done = await peer.wait_terminal(sid, receipt["admission_id"])
        assert done["result"]["text"] == "DISPATCHED", done
    return sid, receipt


async def test_kill_between_delegation_completion_and_delivery(tmp_path, store_url):
    home = tmp_path / "home"
    model = DelegatingModel()
    owners: list[OwnerProcess] = []
    with FakeProvider(model) as provider:
        write_config(home, provider.url)
        try:
            fault = clean_env(home, TETHER_FAULT="pause_before_delivery:60")
            owners.append(OwnerProcess(home, env=fault).start())
            sid, receipt = await start_delegating_turn(home)
            # recorded finished, delivery pending: the owner is now paused in the window
            await until(lambda: [r["state"] for r in delegation_rows(home)]
                        not in ([], ["running"]), "the delegation to finish")
            owners[0].kill()
            [row] = delegation_rows(home)
            assert (row["state"], row["delivery_state"]) == ("completed", "pending"), row
            assert integrity(home, store_url) == "ok"
            assert delegation_admissions(home, sid) == []

            owners.append(OwnerProcess(home).start())
            await until(lambda: [r["status"] for r in delegation_admissions(home, sid)]
                        == ["terminal"], "the recovered delivery to run")
            [adm] = delegation_admissions(home, sid)
            assert adm["request_id"] == row["delegation_id"]
            assert adm["outcome"] == "completed"
            assert delegation_rows(home)[0]["delivery_state"] == "delivered"
            async with await Peer.connect(home) as peer:
                again = await peer.result("prompt.submit", session_id=sid, input_id="parent",
                                          text="split this in two")
                same_receipt(again, receipt)
                assert again["status"] == "terminal"
            # a further clean restart delivers nothing more
            assert owners[1].stop() == 0
            owners.append(OwnerProcess(home).start())
            async with await Peer.connect(home) as peer:
                assert (await peer.result("ping"))["pong"] is True
            assert owners[2].stop() == 0
        finally:
            for owner in owners:
                owner.kill()
    assert len(delegation_admissions(home, sid)) == 1
    assert model.counts == Counter({"parent": 1, "after_dispatch": 1, "child:ALPHA": 1,
                                    "child:BETA": 1, "results": 1})
    assert integrity(home, store_url) == "ok"
    check_event_logs(home)


async def test_kill_while_background_children_run(tmp_path, store_url):
    home = tmp_path / "home"
    model = DelegatingModel(hold_children=True)
    owners: list[OwnerProcess] = []
    with FakeProvider(model) as provider:
        write_config(home, provider.url)
        try:
            owners.append(OwnerProcess(home).start())
            sid, receipt = await start_delegating_turn(home)
            await until(lambda: model.counts["child:ALPHA"] + model.counts["child:BETA"] == 2,
                        "both children in the provider")
            owners[0].kill()
            assert [r["state"] for r in delegation_rows(home)] == ["running"]

            owners.append(OwnerProcess(home).start())
            await until(lambda: [r["status"] for r in delegation_admissions(home, sid)]
                        == ["terminal"], "the interrupted delegation to be delivered")
            [row] = delegation_rows(home)
            assert (row["state"], row["delivery_state"]) == ("interrupted", "delivered")
            [adm] = delegation_admissions(home, sid)
            assert adm["request_id"] == row["delegation_id"]
            async with await Peer.connect(home) as peer:
                done = await peer.wait_terminal(sid, adm["admission_id"])
                assert done["result"]["text"] == "RESULTS_SEEN interrupted"
            assert owners[1].stop() == 0
        finally:
            model.gate.set()
            for owner in owners:
                owner.kill()
    # the children died with the first owner and were not run again
    assert model.counts == Counter({"parent": 1, "after_dispatch": 1, "child:ALPHA": 1,
                                    "child:BETA": 1, "results": 1})
    assert integrity(home, store_url) == "ok"
    check_event_logs(home)


# -- kill while a tool call runs; the unknown policy `interrupt` ---------------------


async def test_kill_during_a_tool_call_leaves_the_session_usable(tmp_path, store_url):
    """The transcript of a turn killed inside a tool call ends with an assistant
    tool_calls message and no tool reply; later turns must still be accepted by a
    strict OpenAI-compatible server."""
    home = tmp_path / "home"
    gate = threading.Event()
    asked: Counter[str] = Counter()

    def handler(req: dict) -> Any:
        if (refused := refuse_bad_history(req)) is not None:
            return refused
        users = [m["content"] for m in req["messages"] if m["role"] == "user"]
        if is_child(req):
            asked["child"] += 1
            gate.wait(60)  # the owner dies while the inline child runs
            return text_reply("CHILD DONE")
        asked[users[-1]] += 1
        if users[-1] == "DELEGATE inline" and req["messages"][-1]["role"] == "user":
            return tool_call_reply("delegate_task", {"goal": "slow work"})
        return text_reply("ANSWER " + users[-1])

    owners: list[OwnerProcess] = []
    with FakeProvider(handler) as provider:
        write_config(home, provider.url)
        try:
            owners.append(OwnerProcess(home).start())
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create"))["session_id"]
                first = await peer.result("prompt.submit", session_id=sid, input_id="t1",
                                          text="DELEGATE inline", finite=True)
                await until(lambda: asked["child"] == 1, "the inline child to run")
                owners[0].kill()

            owners.append(OwnerProcess(home).start())
            async with await Peer.connect(home) as peer:
                r = await peer.result("prompt.resolve_unknown", session_id=sid,
                                      admission_id=first["admission_id"])
                assert r["outcome"] == "interrupted"
                nxt = await peer.result("prompt.submit", session_id=sid, input_id="t2",
                                        text="and now?", finite=True)
                done = await peer.wait_terminal(sid, nxt["admission_id"])
                assert (done["outcome"], done["result"]["text"]) == ("completed",
                                                                     "ANSWER and now?"), done
            assert owners[1].stop() == 0
        finally:
            gate.set()
            for owner in owners:
                owner.kill()
    assert provider.errors == []
    assert asked == Counter({"DELEGATE inline": 1, "child": 1, "and now?": 1})
    assert integrity(home, store_url) == "ok"
    check_event_logs(home)


async def test_inline_children_of_a_crashed_finite_turn_end_after_the_restart(tmp_path, store_url):
    """A viewer of a finite turn that died while its inline children ran sees every
    child end (subagent.complete, interrupted) once the next owner has started."""
    home = tmp_path / "home"
    gate = threading.Event()
    asked: Counter[str] = Counter()

    def handler(req: dict) -> Any:
        if is_child(req):
            asked["child"] += 1
            gate.wait(60)  # the owner dies while both children run
            return text_reply("CHILD DONE")
        return tool_call_reply("delegate_task", {"tasks": [{"goal": "one"}, {"goal": "two"}]})

    owners: list[OwnerProcess] = []
    with FakeProvider(handler) as provider:
        write_config(home, provider.url)
        try:
            owners.append(OwnerProcess(home).start())
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create"))["session_id"]
                first = await peer.result("prompt.submit", session_id=sid, input_id="t1",
                                          text="DELEGATE inline", finite=True)
                await until(lambda: asked["child"] == 2, "both inline children to run")
                owners[0].kill()

            owners.append(OwnerProcess(home).start())
            async with await Peer.connect(home) as peer:
                log = await peer.result("session.events.since", session_id=sid, after_seq=0)
                await peer.result("prompt.resolve_unknown", session_id=sid,
                                  admission_id=first["admission_id"])
            assert owners[1].stop() == 0
        finally:
            gate.set()
            for owner in owners:
                owner.kill()
    mine = [e for e in log["events"] if e["admission_id"] == first["admission_id"]]
    started = {e["payload"]["child_session_id"] for e in mine if e["type"] == "subagent.start"}
    ended = [e["payload"] for e in mine if e["type"] == "subagent.complete"]
    assert len(started) == 2
    assert sorted(p["child_session_id"] for p in ended) == sorted(started)
    assert {p["status"] for p in ended} == {"interrupted"}
    assert integrity(home, store_url) == "ok"
    check_event_logs(home)


async def test_unknown_policy_interrupt_settles_and_announces(tmp_path, store_url):
    home = tmp_path / "home"
    model = Model()
    owners: list[OwnerProcess] = []
    with FakeProvider(model) as provider:
        write_config(home, provider.url, daemon={"unknown_policy": "interrupt"})
        try:
            owners.append(OwnerProcess(home).start())
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create"))["session_id"]
                held = await peer.result("prompt.submit", session_id=sid, input_id="h",
                                         text="HOLD the line")
                await until(lambda: model.asked("HOLD") == 1, "the turn in the provider")
                behind = await peer.result("prompt.submit", session_id=sid, input_id="b",
                                           text="behind it")
                owners[0].kill()

            owners.append(OwnerProcess(home).start())
            async with await Peer.connect(home) as peer:
                # no resolve needed: the policy settled it and the queue went on
                done = await peer.wait_terminal(sid, behind["admission_id"])
                assert done["outcome"] == "completed"
                r = await peer.result("prompt.submit", session_id=sid, input_id="h",
                                      text="HOLD the line")
                same_receipt(r, held)
                assert (r["status"], r["outcome"]) == ("terminal", "interrupted")
                assert "unknown_policy" in r["result"]["error"]
                # a viewer replaying the session sees the settled turn end
                log = await peer.result("session.events.since", session_id=sid, after_seq=0)
                ends = [e for e in log["events"] if e["type"] == "message.complete"]
                assert [(e["admission_id"], e["payload"]["outcome"]) for e in ends] == [
                    (held["admission_id"], "interrupted"),
                    (behind["admission_id"], "completed")]
            assert owners[1].stop() == 0
        finally:
            model.gate.set()
            for owner in owners:
                owner.kill()
    assert model.counts == Counter({"HOLD the line": 1, "behind it": 1})
    assert integrity(home, store_url) == "ok"
    check_event_logs(home)
