"""Scheduled jobs through the real owner (docs/cron.md): firing, fan-out joined inline,
crash recovery, missed times, overlap, restarts, delivery, bad input.

Only inference is faked. Schedules are ``every 1s`` with a zero grace, so every test
sees several scheduled times in a few seconds; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, Reply, text_reply, tool_call_reply
from harness import OwnerProcess, Peer, db_rows, until, write_config

WORKERS = ("WORKER_ALPHA", "WORKER_BETA")
JOINED = "FANOUT_JOINED_AND_SYNTHESIZED"


def _users(req: dict) -> list[str]:
    return [m.get("content") or "" for m in req["messages"] if m["role"] == "user"]


class Fanout:
    """A parent prompt gets one delegate_task call for two workers; each child (both in
    flight at once: a two-party barrier) answers its token; the parent's follow-up gets
    JOINED only if both tokens are in its tool results."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2)

    def __call__(self, req: dict) -> Reply:
        first = _users(req)[:1]
        worker = next((w for w in WORKERS if first and w in first[0]), None)
        if worker is not None:
            self.barrier.wait(timeout=20)
            return text_reply(f"{worker}_COMPLETE")
        if req["messages"][-1]["role"] == "tool":
            results = " ".join(m.get("content") or "" for m in req["messages"]
                               if m["role"] == "tool")
            return text_reply(JOINED if all(f"{w}_COMPLETE" in results for w in WORKERS)
                              else "NOT_JOINED")
        return tool_call_reply("delegate_task", {"tasks": [
            {"goal": f"Complete {w} and return its completion token."} for w in WORKERS]})


class Gate:
    """Answers DONE at once, except that the first ``hold`` requests wait for ``open``."""

    def __init__(self, hold: int = 1) -> None:
        self.open = threading.Event()
        self.hold = hold
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, req: dict) -> Reply:
        with self._lock:
            self.count += 1
            n = self.count
        if n <= self.hold:
            self.open.wait(timeout=30)
        return text_reply("DONE")


@asynccontextmanager
async def scene(tmp_path: Path, handler: Any) -> AsyncIterator[tuple[Path, FakeProvider]]:
    home = tmp_path / "home"
    with FakeProvider(handler) as fake:
        write_config(home, fake.url)
        yield home, fake


async def runs(peer: Peer, name: str) -> list[dict[str, Any]]:
    """Every run of the job, oldest first."""
    out = (await peer.result("cron.runs", name=name, limit=500))["runs"]
    return sorted(out, key=lambda r: r["scheduled_for"])


async def wait_runs(peer: Peer, name: str, pred: Any, what: str,
                    timeout: float = 60) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        got = await runs(peer, name)
        if pred(got):
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}: {got}")
        await asyncio.sleep(0.1)


def finished(r: dict[str, Any]) -> bool:
    return r["status"] == "admitted" and r["admission_status"] == "terminal"


async def create(peer: Peer, name: str = "tick", **params: Any) -> dict[str, Any]:
    params = {"schedule": "every 1s", "prompt": "run the job", "grace_seconds": 0, **params}
    return await peer.result("cron.create", name=name, **params)


# -- firing ---------------------------------------------------------------------


async def test_each_second_fires_one_finite_admission_with_children_joined_inline(tmp_path):
    async with scene(tmp_path, Fanout()) as (home, fake):
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                await create(peer)
                await wait_runs(peer, "tick", lambda rs: sum(map(finished, rs)) >= 3,
                                "three finished runs")
                await peer.result("cron.pause", name="tick")
                # the pause is committed: what fired is all that will (one run may still end)
                got = await wait_runs(
                    peer, "tick", lambda rs: all(finished(r) for r in rs
                                                 if r["status"] == "admitted"),
                    "every admitted run to end")
    admitted = [r for r in got if r["status"] == "admitted"]
    assert len(admitted) >= 3
    for r in admitted:
        assert r["outcome"] == "completed" and r["result"]["text"] == JOINED, r
        assert r["scheduled_for"] == int(r["scheduled_for"])  # on the second
    # every scheduled second from the first to the last is accounted for exactly once
    # (a fire, or a skipped row counting the times it stands for)
    span = got[-1]["scheduled_for"] - got[0]["scheduled_for"] + 1
    assert sum(max(1, r["missed_count"]) for r in got) == span
    # one finite admission per run, principal cron, in its own fresh cron session
    rows = db_rows(home, "SELECT a.principal_id, a.request_id, a.payload_json, s.source, "
                         "s.title FROM session_admissions a JOIN sessions s "
                         "ON s.session_id = a.target_session_id WHERE s.parent_session_id "
                         "IS NULL")
    assert len(rows) == len(admitted)
    for principal, request_id, payload, source, title in rows:
        assert principal == "cron" and source == "cron" and title.startswith("tick · ")
        assert request_id.startswith("cron:tick:") and '"finite":true' in payload
    assert {r["input_id"] for r in admitted} == {row[1] for row in rows}
    assert db_rows(home, "SELECT COUNT(*) FROM async_delegations") == [(0,)]
    children = db_rows(home, "SELECT COUNT(*) FROM sessions WHERE parent_session_id IS NOT NULL")
    assert children == [(2 * len(admitted),)]


async def test_kill_during_a_run_leaves_it_unknown_and_the_next_time_fires(tmp_path):
    gate = Gate(hold=1)
    async with scene(tmp_path, gate) as (home, fake):
        owner = OwnerProcess(home).start()
        try:
            async with await Peer.connect(home) as peer:
                await create(peer)
                await until(lambda: gate.count >= 1, "the first run to reach the model")
                first = (await wait_runs(peer, "tick", lambda rs: any(
                    r["admission_status"] == "started" for r in rs), "a started run"))
            owner.kill()  # SIGKILL, mid-turn
        finally:
            gate.open.set()
        started = next(r for r in first if r["admission_status"] == "started")
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                got = await wait_runs(peer, "tick", lambda rs: any(
                    finished(r) and r["scheduled_for"] > started["scheduled_for"] for r in rs),
                    "a later run to finish")
                await peer.result("cron.pause", name="tick")
                again = {r["run_id"]: r for r in await runs(peer, "tick")}
                # settling it (what `tether resolve` does) shows on the run at once
                await peer.result("prompt.resolve_unknown", session_id=started["session_id"],
                                  admission_id=started["admission_id"])
                settled = {r["run_id"]: r for r in await runs(peer, "tick")}
    assert again[started["run_id"]]["admission_status"] == "unknown"
    assert settled[started["run_id"]]["outcome"] == "interrupted"
    later = [r for r in got if finished(r) and r["scheduled_for"] > started["scheduled_for"]]
    assert later and all(r["outcome"] == "completed" for r in later)
    # never re-run: one admission for that time, and the model was asked once for it
    assert db_rows(home, "SELECT COUNT(*) FROM session_admissions WHERE request_id = ?",
                   started["input_id"]) == [(1,)]
    assert db_rows(home, "SELECT COUNT(*) FROM cron_runs WHERE scheduled_for = ?",
                   started["scheduled_for"]) == [(1,)]


@pytest.mark.parametrize("missed", ["catch_up", "skip"])
async def test_an_owner_down_across_three_times_records_them_missed(tmp_path, missed):
    async with scene(tmp_path, lambda req: text_reply("DONE")) as (home, fake):
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                await create(peer, missed=missed)
                await wait_runs(peer, "tick", lambda rs: any(map(finished, rs)), "a first run")
                stopping = time.time()
        stopped = time.time()  # the owner has exited
        await asyncio.sleep(3.5)  # three scheduled times or more pass
        restarted = time.time()
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                await wait_runs(peer, "tick", lambda rs: any(
                    r["skip_reason"] == "missed" for r in rs), "the missed row")
                await peer.result("cron.pause", name="tick")
                got = await wait_runs(peer, "tick", lambda rs: all(
                    finished(r) for r in rs if r["status"] == "admitted"), "runs to end")
    missed_rows = [r for r in got if r["skip_reason"] == "missed"]
    assert len(missed_rows) == 1
    assert stopping < missed_rows[0]["scheduled_for"] < restarted
    in_downtime = [r for r in got if r["status"] == "admitted"
                   and stopped < r["scheduled_for"] < restarted]
    catch_up = [r for r in got if r["kind"] == "catch_up"]
    if missed == "catch_up":
        assert len(catch_up) == 1 and catch_up[0]["outcome"] == "completed"
        assert missed_rows[0]["missed_count"] >= 2
        assert all(r["kind"] == "catch_up" for r in in_downtime)
    else:
        assert catch_up == [] and in_downtime == []
        assert missed_rows[0]["missed_count"] >= 3
    assert not any(r["kind"] == "late" for r in got)  # no grace was given


async def test_a_time_that_comes_while_the_last_run_runs_is_skipped_still_running(tmp_path):
    gate = Gate(hold=1)
    async with scene(tmp_path, gate) as (home, fake):
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                try:
                    await create(peer)
                    await wait_runs(peer, "tick", lambda rs: any(
                        r["skip_reason"] == "still_running" for r in rs), "an overlap skip")
                finally:
                    gate.open.set()
                await peer.result("cron.pause", name="tick")
                got = await wait_runs(peer, "tick", lambda rs: all(
                    finished(r) for r in rs if r["status"] == "admitted"), "runs to end")
    first = next(r for r in got if r["status"] == "admitted")
    skipped = [r for r in got if r["skip_reason"] == "still_running"]
    assert skipped and all(r["scheduled_for"] > first["scheduled_for"] for r in skipped)
    assert all(r["session_id"] is None and r["admission_id"] is None for r in skipped)
    assert gate.count == sum(r["status"] == "admitted" for r in got)


async def test_overlap_queue_fires_the_waiting_time_once_the_run_ends(tmp_path):
    gate = Gate(hold=1)
    async with scene(tmp_path, gate) as (home, fake):
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                try:
                    await create(peer, overlap="queue", grace_seconds=60)
                    await until(lambda: gate.count >= 1, "the first run to reach the model")
                    await asyncio.sleep(1.5)  # a time comes and waits
                finally:
                    gate.open.set()
                got = await wait_runs(peer, "tick", lambda rs: sum(map(finished, rs)) >= 2,
                                      "the queued time to run")
                await peer.result("cron.pause", name="tick")
    assert not any(r["skip_reason"] == "still_running" for r in got)


async def test_restarts_racing_a_due_time_make_one_run_and_one_inference_per_time(tmp_path):
    async with scene(tmp_path, lambda req: text_reply("DONE")) as (home, fake):
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                await create(peer, grace_seconds=60)
        for _ in range(3):
            # two owners race for the home; exactly one gets it, the other exits
            racers = [OwnerProcess(home), OwnerProcess(home)]
            results = await asyncio.gather(*(asyncio.to_thread(o.start) for o in racers),
                                           return_exceptions=True)
            winners = [o for o, r in zip(racers, results, strict=True)
                       if not isinstance(r, BaseException)]
            try:
                assert len(winners) == 1, results
                await asyncio.sleep(1.3)  # across a due time
            finally:
                for o in racers:
                    if o.alive:
                        o.stop()
                    o.kill()
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                await peer.result("cron.pause", name="tick")
                got = await wait_runs(peer, "tick", lambda rs: all(
                    finished(r) for r in rs if r["status"] == "admitted"), "runs to end")
    admitted = [r for r in got if r["status"] == "admitted"]
    assert admitted
    times = [r["scheduled_for"] for r in got]
    assert len(times) == len(set(times))
    cron_admissions = db_rows(home, "SELECT request_id FROM session_admissions "
                                    "WHERE principal_id = 'cron'")
    assert len(cron_admissions) == len({r for (r,) in cron_admissions}) == len(admitted)
    assert len(fake.requests) == len(admitted)  # one inference per fired time


# -- delivery -------------------------------------------------------------------


async def test_answers_are_delivered_once_to_a_file_and_as_a_notice_to_a_session(tmp_path):
    out = tmp_path / "reports" / "daily.md"
    out.parent.mkdir()
    async with scene(tmp_path, lambda req: text_reply("THE REPORT")) as (home, fake):
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                target = (await peer.result("session.create"))["session_id"]
                await create(peer, "to-file", schedule="@yearly", deliver=f"file:{out}")
                await create(peer, "to-session", schedule="@yearly",
                             deliver=f"session:{target}")
                await create(peer, "to-nowhere", schedule="@yearly", deliver="session:ses_gone")
                for name in ("to-file", "to-file", "to-session", "to-nowhere"):
                    run = await peer.result("cron.run", name=name)
                    await peer.wait_terminal(run["session_id"], run["admission_id"])
                    await wait_runs(peer, name, lambda rs: all(
                        r["delivery_status"] != "pending" for r in rs), "the delivery")
                notices = [e for e in await peer.all_events(target) if e["type"] == "cron.notice"]
                file_runs = await runs(peer, "to-file")
                failed = (await runs(peer, "to-nowhere"))[0]
    text = out.read_text()
    assert text.count("THE REPORT") == 2
    for r in file_runs:
        assert r["delivery_status"] == "delivered" and f"tether cron run {r['run_id']}" in text
    assert len(notices) == 1 and notices[0]["payload"]["text"] == "THE REPORT"
    assert notices[0]["payload"]["job"] == "to-session"
    # a notice never starts a turn in the target session
    assert db_rows(home, "SELECT COUNT(*) FROM session_admissions WHERE target_session_id = ?",
                   target) == [(0,)]
    assert failed["delivery_status"] == "failed" and "ses_gone" in failed["delivery_error"]


# -- bad input ------------------------------------------------------------------


async def test_bad_input_is_invalid_params_naming_the_field_and_creates_nothing(tmp_path):
    async with scene(tmp_path, lambda req: text_reply("DONE")) as (home, fake):
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                cases = [({"schedule": "every banana"}, "schedule"),
                         ({"schedule": "0 25 * * *"}, "schedule"),
                         ({"schedule": "at 2001-01-01T00:00"}, "schedule"),
                         ({"tz": "Mars/Olympus"}, "tz"),
                         ({"deliver": "file:relative.md"}, "deliver"),
                         ({"deliver": "email:me"}, "deliver"),
                         ({"toolsets": ["nope"]}, "toolsets")]
                for params, field in cases:
                    reply = await peer.call("cron.create", name="bad", prompt="p",
                                            **{"schedule": "@daily", **params})
                    err = reply["error"]
                    assert err["message"] == "invalid_params", reply
                    assert [f["loc"] for f in err["data"]["fields"]] == [field], reply
                    assert field in err["data"]["detail"]
                strict = await peer.call("cron.create", name="bad", prompt="p", schedule="@daily",
                                         grace_seconds="5")
                assert strict["error"]["message"] == "invalid_params"
                assert (await peer.result("cron.list"))["jobs"] == []
                await create(peer, "ok", schedule="@daily")
                dup = await peer.call("cron.create", name="ok", prompt="p", schedule="@daily")
                assert dup["error"]["data"]["fields"][0]["loc"] == "name"
                upd = await peer.call("cron.update", name="ok", schedule="every")
                assert upd["error"]["data"]["fields"][0]["loc"] == "schedule"
                assert (await peer.result("cron.get", name="ok"))["schedule"] == "@daily"
                missing = await peer.call("cron.run", name="nope")
                assert missing["error"]["message"] == "not_found"


# -- one-shots, pause/resume, retention ---------------------------------------------


async def test_one_shots_fire_once_and_paused_times_are_one_row(tmp_path):
    async with scene(tmp_path, lambda req: text_reply("DONE")) as (home, fake):
        write_config(home, fake.url, cron={"max_runs_kept": 3})
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                once = await create(peer, "once", schedule="in 1s")
                assert once["next_run_at"] is not None
                await create(peer, "tick")
                await wait_runs(peer, "once", lambda rs: any(map(finished, rs)), "the one-shot")
                # four runs of tick answered (the one-shot asked once)
                await until(lambda: len(fake.requests) >= 5, "four runs of tick")
                paused = await peer.result("cron.pause", name="tick")
                assert paused["paused"] and paused["next_run_at"] is None
                await asyncio.sleep(2.5)  # two times or more pass while paused
                resumed = await peer.result("cron.resume", name="tick")
                assert not resumed["paused"] and resumed["next_run_at"] > time.time() - 1
                await peer.result("cron.pause", name="tick")
                ticks = await wait_runs(peer, "tick", lambda rs: all(
                    finished(r) for r in rs if r["status"] == "admitted"), "runs to end")
                done = await peer.result("cron.get", name="once")
                once_runs = await runs(peer, "once")
    assert len(once_runs) == 1 and once_runs[0]["outcome"] == "completed"
    assert done["next_run_at"] is None and done["last_run"]["run_id"] == once_runs[0]["run_id"]
    # only the newest rows are kept (cron.max_runs_kept), and the pause is one row
    assert len(ticks) <= 3
    (pause_row,) = [r for r in ticks if r["skip_reason"] == "paused"]
    assert pause_row["missed_count"] >= 2
