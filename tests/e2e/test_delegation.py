"""delegate_task through the real owner: inline joins, background delivery, limits, events.

Only inference is faked. The fake model decides every reply from the request alone, the
way a model would: a child's request (its first user message names a worker) gets that
worker's completion token; a fresh parent prompt gets one ``delegate_task`` call; the
parent's follow-up gets JOINED only if every child's token is in its tool results; a
delivered background result (a user message starting with the results marker) gets
BACKGROUND_JOINED only if every token is in it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from fakeprovider import FakeProvider, Reply, Status, text_reply, tool_call_reply
from harness import OwnerProcess, Peer, until, write_config
from scene import Scene, Store, owner_env

WORKERS = ("WORKER_ALPHA", "WORKER_BETA")
JOINED = "FANOUT_JOINED_AND_SYNTHESIZED"
NOT_JOINED = "PARENT_ENDED_BEFORE_JOIN"
DISPATCH_ACK = "HELPERS_ARE_WORKING"
BACKGROUND_JOINED = "BACKGROUND_RESULTS_JOINED"
BACKGROUND_NOT_JOINED = "BACKGROUND_RESULTS_INCOMPLETE"
RESULTS_MARKER = "[delegation results]"
HOLD = "HOLD_THIS_TURN"
PROMPT = "Delegate the independent tasks, then synthesize their results."

ChildReply = Callable[[str, dict], Reply]


def _text(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def users(req: dict) -> list[str]:
    return [_text(m) for m in req["messages"] if m["role"] == "user"]


def tool_results(req: dict) -> list[str]:
    return [_text(m) for m in req["messages"] if m["role"] == "tool"]


def tool_names(req: dict) -> set[str]:
    return {t["function"]["name"] for t in req.get("tools") or []}


def worker_of(req: dict, workers: tuple[str, ...]) -> str | None:
    """The worker a child request is for (its first user message is the task)."""
    first = users(req)[:1]
    return next((w for w in workers if first and w in first[0]), None)


def barrier_child(parties: int) -> ChildReply:
    """Every child waits until ``parties`` children are in flight at once."""
    barrier = threading.Barrier(parties)

    def reply(worker: str, req: dict) -> Reply:
        barrier.wait(timeout=20)
        return text_reply(f"{worker}_COMPLETE")

    return reply


def blocking_child(release: threading.Event) -> ChildReply:
    def reply(worker: str, req: dict) -> Reply:
        release.wait(timeout=25)
        return text_reply(f"{worker}_COMPLETE")

    return reply


class FanoutModel:
    """The scripted model; see the module docstring."""

    def __init__(self, workers: tuple[str, ...] = WORKERS, child: ChildReply | None = None,
                 tasks: list[dict] | None = None, hold: threading.Event | None = None) -> None:
        self.workers = workers
        self.child = child or barrier_child(len(workers))
        self.tasks = tasks or [{"goal": f"Complete {w} and return its completion token."}
                               for w in workers]
        self.hold = hold

    def __call__(self, req: dict) -> Reply:
        worker = worker_of(req, self.workers)
        if worker is not None:
            return self.child(worker, req)
        said = users(req)
        last = req["messages"][-1]
        if last["role"] == "tool":
            results = " ".join(tool_results(req))
            if '"dispatched"' in results:
                return text_reply(DISPATCH_ACK)
            joined = all(f"{w}_COMPLETE" in results for w in self.workers)
            return text_reply(JOINED if joined else NOT_JOINED)
        if said[-1].startswith(RESULTS_MARKER):
            joined = all(f"{w}_COMPLETE" in said[-1] for w in self.workers)
            return text_reply(BACKGROUND_JOINED if joined else BACKGROUND_NOT_JOINED)
        if HOLD in said[-1]:
            if self.hold is not None:
                self.hold.wait(timeout=25)
            return text_reply("HELD_TURN_DONE")
        return tool_call_reply("delegate_task", {"tasks": self.tasks}, "call_fanout")

    # -- what the provider saw ----------------------------------------------

    def child_requests(self, fake: FakeProvider, worker: str | None = None) -> list[dict]:
        return [r for r in list(fake.requests)
                if (w := worker_of(r, self.workers)) is not None and worker in (None, w)]

    @staticmethod
    def parent_followups(fake: FakeProvider) -> list[dict]:
        return [r for r in list(fake.requests) if r["messages"][-1]["role"] == "tool"]

    @staticmethod
    def deliveries(fake: FakeProvider) -> list[dict]:
        """Requests whose last user message is a delivered background result."""
        return [r for r in list(fake.requests)
                if (said := users(r)) and said[-1].startswith(RESULTS_MARKER)]


def admissions_of(where: Scene | Store, sid: str) -> list[tuple]:
    """(Of the store of a scene, or of a home started without one.)"""
    return where.rows("SELECT principal_id, request_id, status, outcome FROM "
                      "session_admissions WHERE target_session_id = ? ORDER BY seq", sid)


def delegation_rows(where: Scene | Store) -> list[tuple]:
    return where.rows("SELECT delegation_id, origin_session_id, state, delivery_state, "
                      "result_json FROM async_delegations")


def events_of(peer: Peer, sid: str, type_: str) -> list[dict]:
    return [e for e in peer.events if e["session_id"] == sid and e["type"] == type_]


def overlapping_child(until_most: int, timeout: float) -> tuple[ChildReply, list[int]]:
    """A child reply that counts children in flight (``[now, most seen]``) and
    holds each one until ``until_most`` were in flight at once, or ``timeout``."""
    lock = threading.Condition()
    in_flight = [0, 0]

    def child(worker: str, req: dict) -> Reply:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
            lock.notify_all()
            lock.wait_for(lambda: in_flight[1] >= until_most, timeout=timeout)
            in_flight[0] -= 1
        return text_reply(f"{worker}_COMPLETE")

    return child, in_flight


async def turn(peer: Peer, sid: str, input_id: str, text: str = PROMPT, **params: Any) -> dict:
    receipt = await peer.result("prompt.submit", session_id=sid, input_id=input_id, text=text,
                                **params)
    return await peer.wait_terminal(sid, receipt["admission_id"])


# -- inline (finite) --------------------------------------------------------------


async def test_finite_turn_joins_parallel_children_inline(scene):
    model = FanoutModel()
    async with scene(model, session={"title": "parent"},
                     delegation={"max_concurrent_children": 2, "max_depth": 1}) as s:
        fake, peer, sid = s.provider, s.peer, s.session_id
        done = await turn(peer, sid, "fanout-1", finite=True)
        assert done["outcome"] == "completed", done
        assert done["result"]["text"] == JOINED
        sessions = (await peer.result("session.list", limit=50))["sessions"]
        # the same input_id again is the same terminal receipt, not a second run
        again = await peer.result("prompt.submit", session_id=sid,
                                  input_id="fanout-1", text=PROMPT, finite=True)
        assert again["status"] == "terminal"
        assert again["admission_id"] == done["admission_id"]
        starts = events_of(peer, sid, "subagent.start")
        completes = events_of(peer, sid, "subagent.complete")
        assert not fake.errors, fake.errors

    # one admission (the parent's); nothing detached left for a later viewer
    assert s.rows("SELECT principal_id, status, outcome FROM session_admissions") == [
        ("local", "terminal", "completed")]
    assert delegation_rows(s) == []
    # both children were in flight at once and each ran in its own child session
    assert sorted(worker_of(r, WORKERS) for r in model.child_requests(fake)) == sorted(WORKERS)
    children = {x["session_id"] for x in sessions if x["parent_session_id"] == sid}
    assert len(children) == 2
    assert {x["source"] for x in sessions if x["session_id"] in children} == {"delegation"}
    # a child sees no parent history: only a system prompt and its task
    for req in model.child_requests(fake):
        assert [m["role"] for m in req["messages"]] == ["system", "user"]
        assert PROMPT not in json.dumps(req["messages"])
        assert "delegate_task" not in tool_names(req)  # max_depth 1
    # the parent's follow-up carried both results, as tool results of the same turn
    [followup] = model.parent_followups(fake)
    [result] = [json.loads(t) for t in tool_results(followup)]
    assert [r["status"] for r in result["results"]] == ["completed", "completed"]
    assert [r["summary"] for r in result["results"]] == [f"{w}_COMPLETE" for w in WORKERS]
    assert {"task_index", "api_calls", "duration_seconds", "model", "exit_reason"} <= set(
        result["results"][0])
    # viewers of the parent saw every child start and finish
    assert sorted(e["payload"]["task_index"] for e in starts) == [0, 1]
    assert {e["payload"]["child_session_id"] for e in starts} == children
    assert sorted((e["payload"]["task_index"], e["payload"]["status"], e["payload"]["summary"])
                  for e in completes) == [(0, "completed", "WORKER_ALPHA_COMPLETE"),
                                          (1, "completed", "WORKER_BETA_COMPLETE")]
    assert {e["payload"]["child_session_id"] for e in completes} == children
    # inline children belong to the parent's turn
    assert {e["admission_id"] for e in starts + completes} == {done["admission_id"]}


async def test_three_tasks_run_at_most_two_at_once(scene):
    workers = ("WORKER_ONE", "WORKER_TWO", "WORKER_THREE")
    # each child waits until two children have overlapped at least once
    child, in_flight = overlapping_child(until_most=2, timeout=20)
    model = FanoutModel(workers, child)
    async with scene(model, delegation={"max_concurrent_children": 2}) as s:
        fake = s.provider
        done = await turn(s.peer, s.session_id, "three", finite=True)
    assert done["result"]["text"] == JOINED, done
    assert in_flight[1] == 2  # queued, not failed, and never more than the limit
    [followup] = model.parent_followups(fake)
    results = json.loads(tool_results(followup)[0])["results"]
    assert [r["status"] for r in results] == ["completed"] * 3


async def test_failed_child_is_reported_and_siblings_succeed(scene):
    def child(worker: str, req: dict) -> Reply:
        if worker == "WORKER_BETA":
            return Status(400, '{"error": {"message": "this goal is not allowed"}}')
        return text_reply(f"{worker}_COMPLETE")

    model = FanoutModel(child=child)
    async with scene(model) as s:
        fake, peer, sid = s.provider, s.peer, s.session_id
        done = await turn(peer, sid, "one-fails", finite=True)
        completes = events_of(peer, sid, "subagent.complete")
    assert done["outcome"] == "completed"
    assert done["result"]["text"] == NOT_JOINED  # the parent saw that one child failed
    [followup] = model.parent_followups(fake)
    alpha, beta = json.loads(tool_results(followup)[0])["results"]
    assert (alpha["status"], alpha["summary"]) == ("completed", "WORKER_ALPHA_COMPLETE")
    assert beta["status"] == "failed"
    assert beta["error"] and "bad_request" in beta["error"]
    assert sorted(e["payload"]["status"] for e in completes) == ["completed", "failed"]


async def test_depth_limit_and_toolsets_restrict_children(scene):
    workers = ("WORKER_PLAIN", "WORKER_NONE", "WORKER_EXTRA")
    tasks = [{"goal": "Finish WORKER_PLAIN."},
             {"goal": "Finish WORKER_NONE.", "toolsets": []},
             {"goal": "Finish WORKER_EXTRA.", "toolsets": ["delegation", "not_the_parents"]}]
    model = FanoutModel(workers, lambda w, r: text_reply(f"{w}_COMPLETE"), tasks)
    # depth 2: children may delegate once more, unless their task narrows the toolsets
    async with scene(model, session={"toolsets": ["delegation"]},
                     delegation={"max_depth": 2}) as sc:
        fake, peer, sid = sc.provider, sc.peer, sc.session_id
        done = await turn(peer, sid, "depth", finite=True)
        assert done["result"]["text"] == JOINED, done
        sessions = (await peer.result("session.list"))["sessions"]
        infos = {}
        for s in sessions:
            if s["parent_session_id"] == sid:
                snap = await peer.result("session.resume", session_id=s["session_id"])
                infos[snap["info"]["title"]] = snap["info"]["toolsets"]
    by_worker = {w: model.child_requests(fake, w)[0] for w in workers}
    assert "delegate_task" in tool_names(by_worker["WORKER_PLAIN"])
    assert tool_names(by_worker["WORKER_NONE"]) == set()
    assert tool_names(by_worker["WORKER_EXTRA"]) == {"delegate_task"}
    # a toolset the parent lacks is not granted to the child
    assert infos["Finish WORKER_EXTRA."] == ["delegation"]
    assert infos["Finish WORKER_NONE."] == []


async def test_children_use_the_delegation_model_and_endpoint(scene):
    parent_model = FanoutModel(child=lambda w, r: Status(500))  # children must not come here
    child_model = FanoutModel(child=barrier_child(2))
    with FakeProvider(child_model) as child_fake:
        async with scene(parent_model, delegation={
                "base_url": child_fake.url, "model": "child-model", "api_key": "child-key"}) as s:
            parent_fake = s.provider
            done = await turn(s.peer, s.session_id, "other-model", finite=True)
    assert done["result"]["text"] == JOINED, done
    assert parent_model.child_requests(parent_fake) == []
    children = child_model.child_requests(child_fake)
    assert len(children) == 2 and len(child_fake.requests) == 2
    assert {r["model"] for r in children} == {"child-model"}
    assert {h.get("authorization") for h in child_fake.request_headers} == {"Bearer child-key"}
    assert {r["model"] for r in parent_fake.requests} == {"test-model"}
    results = json.loads(tool_results(parent_model.parent_followups(parent_fake)[0])[0])
    assert {r["model"] for r in results["results"]} == {"child-model"}


async def test_delegation_endpoint_does_not_receive_the_parents_key(scene):
    parent_model = FanoutModel()
    child_model = FanoutModel(child=lambda w, r: text_reply(f"{w}_COMPLETE"))
    with FakeProvider(child_model) as child_fake:
        # another endpoint and no delegation.api_key: the parent's key stays with its endpoint
        async with scene(parent_model, delegation={"base_url": child_fake.url}) as s:
            parent_fake = s.provider
            done = await turn(s.peer, s.session_id, "no-key-leak", finite=True)
    assert done["result"]["text"] == JOINED, done
    assert len(child_fake.requests) == 2
    assert all("authorization" not in h for h in child_fake.request_headers)
    assert {h.get("authorization") for h in parent_fake.request_headers} == {
        "Bearer local-test-only"}


async def test_interrupting_a_finite_parent_stops_its_children(scene):
    release = threading.Event()
    model = FanoutModel(child=blocking_child(release))
    try:
        async with scene(model) as sc:
            fake, peer, sid = sc.provider, sc.peer, sc.session_id
            receipt = await peer.result("prompt.submit", session_id=sid,
                                        input_id="to-stop", text=PROMPT, finite=True)
            await until(lambda: len(model.child_requests(fake)) == 2, what="children")
            await peer.wait_event(lambda e: e["type"] == "subagent.start"
                                  and e["payload"]["task_index"] == 1)
            stopped = await peer.result("session.interrupt", session_id=sid)
            assert stopped["interrupted"] is True
            done = await peer.wait_terminal(sid, receipt["admission_id"])
            release.set()  # the provider answers now; nobody may be listening
            # the owner keeps serving: a later turn in the session still runs
            later = await turn(peer, sid, "after", text=f"{HOLD} afterwards")
            completes = events_of(peer, sid, "subagent.complete")
            children = [s["session_id"] for s in (await peer.result("session.list"))[
                "sessions"] if s["parent_session_id"] == sid]
    finally:
        release.set()
    assert done["outcome"] == "cancelled", done
    assert later["outcome"] == "completed"
    assert sorted((e["payload"]["task_index"], e["payload"]["status"]) for e in completes) == [
        (0, "interrupted"), (1, "interrupted")]
    assert model.parent_followups(fake) == []  # the parent never saw a result
    assert len(children) == 2
    marks = ",".join("?" * len(children))
    assert sc.rows(f"SELECT COUNT(*) FROM messages WHERE role = 'assistant' "
                   f"AND session_id IN ({marks})", *children) == [(0,)]
    assert delegation_rows(sc) == []


# -- background (non-finite) ------------------------------------------------------


async def test_background_delegation_is_delivered_once_into_its_origin(tmp_path, store_url):
    home = tmp_path / "home"
    store, env = Store(home, store_url), owner_env(home, store_url)
    model = FanoutModel()
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home, env=env):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", title="origin"))["session_id"]
                first = await turn(peer, sid, "bg-1")
                # the submitter goes away; delivery must not depend on it
            async with await Peer.connect(home) as other:
                newer = (await other.result("session.create", title="newer"))["session_id"]
                await until(lambda: [r for r in delegation_rows(store) if r[3] == "delivered"],
                            what="delivery")
                adm = await until(lambda: [a for a in admissions_of(store, sid)
                                           if a[0] == "delegation" and a[2] == "terminal"],
                                  what="the delivery turn")
                final = await other.result("session.resume", session_id=sid, after_seq=0)
                events = final["events"]
        assert not fake.errors, fake.errors

    assert first["outcome"] == "completed"
    assert first["result"]["text"] == DISPATCH_ACK
    [followup] = model.parent_followups(fake)
    dispatched = json.loads(tool_results(followup)[0])
    assert dispatched["status"] == "dispatched"
    [(delegation_id, origin, state, delivery, result_json)] = delegation_rows(store)
    assert dispatched["delegation_id"] == delegation_id
    assert (origin, state, delivery) == (sid, "completed", "delivered")
    assert [r["summary"] for r in json.loads(result_json)["results"]] == [
        f"{w}_COMPLETE" for w in WORKERS]
    # a second admission, principal delegation, identity = delegation_id, same session
    assert admissions_of(store, sid) == [
        ("local", "bg-1", "terminal", "completed"),
        ("delegation", delegation_id, "terminal", "completed")]
    assert adm[0][1] == delegation_id
    assert admissions_of(store, newer) == []
    # the model saw the delivered results exactly once, and answered from them
    assert len(model.deliveries(fake)) == 1
    assert final["messages"][-1]["content"] == BACKGROUND_JOINED
    types = [e["type"] for e in events]
    assert types.count("delegation.dispatched") == 1
    assert types.count("delegation.complete") == 1
    assert types.count("subagent.start") == 2 and types.count("subagent.complete") == 2
    complete = next(e for e in events if e["type"] == "delegation.complete")
    assert complete["payload"]["delegation_id"] == delegation_id
    assert complete["payload"]["state"] == "completed"
    assert complete["payload"]["results"] == [{"task_index": 0, "status": "completed"},
                                              {"task_index": 1, "status": "completed"}]
    assert store.rows("SELECT admission_id FROM session_admissions WHERE principal_id = "
                         "'delegation'") == [(complete["payload"]["admission_id"],)]
    # the delivery turn starts after the delivery was recorded
    assert types.index("delegation.complete") < len(types) - 1 - types[::-1].index(
        "message.start")


async def test_a_turn_stopped_as_it_dispatches_still_leaves_a_delegation_that_runs(scene):
    """session.interrupt right after the delegate_task call starts: the turn ends
    cancelled, and the delegation it recorded still runs and is delivered once
    (it used to stay running, with no child, until the next owner start)."""
    model = FanoutModel()
    async with scene(model) as s:
        fake, peer, sid = s.provider, s.peer, s.session_id
        r = await peer.result("prompt.submit", session_id=sid, input_id="cut",
                              text=PROMPT)
        await peer.wait_event(lambda e: e["type"] == "tool.start")
        await peer.result("session.interrupt", session_id=sid)
        stopped = await peer.wait_terminal(sid, r["admission_id"])
        [(delegation_id, _, _, _, _)] = await until(lambda: delegation_rows(s),
                                                    what="the recorded delegation")
        await until(lambda: delegation_rows(s)[0][3] == "delivered",
                    what="its delivery", timeout=20)
        await until(lambda: [a for a in admissions_of(s, sid)
                             if a[0] == "delegation" and a[2] == "terminal"],
                    what="the delivery turn")
    assert stopped["outcome"] in ("cancelled", "completed")
    assert len(model.child_requests(fake)) == 2  # the children ran
    assert [a[:2] for a in admissions_of(s, sid)] == [
        ("local", "cut"), ("delegation", delegation_id)]


async def test_the_delivery_turn_runs_with_the_dispatching_turns_options(scene):
    """A prompt sent with its own model: its children and the follow-up turn that
    reads their results use that model too, not the session's default."""
    model = FanoutModel()
    async with scene(model, model={"default": "session-default"}) as s:
        fake, peer, sid = s.provider, s.peer, s.session_id
        first = await turn(peer, sid, "opt", model="turn-model")
        await until(lambda: [a for a in admissions_of(s, sid)
                             if a[0] == "delegation" and a[2] == "terminal"],
                    what="the delivery turn")
    assert first["result"]["text"] == DISPATCH_ACK
    [delivery] = model.deliveries(fake)
    assert delivery["model"] == "turn-model"
    assert {r["model"] for r in model.child_requests(fake)} == {"turn-model"}


async def test_delivery_queues_behind_the_running_turn(tmp_path, store_url):
    home = tmp_path / "home"
    store, env = Store(home, store_url), owner_env(home, store_url)
    release, hold = threading.Event(), threading.Event()
    model = FanoutModel(child=blocking_child(release), hold=hold)
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        try:
            with OwnerProcess(home, env=env):
                async with await Peer.connect(home) as peer:
                    sid = (await peer.result("session.create"))["session_id"]
                    first = await turn(peer, sid, "dispatch")
                    assert first["result"]["text"] == DISPATCH_ACK
                    busy = await peer.result("prompt.submit", session_id=sid,
                                             input_id="busy", text=f"{HOLD} please")
                    await until(lambda: any(HOLD in users(r)[-1] for r in fake.requests),
                                what="the second turn's request")
                    release.set()  # children finish while the second turn runs
                    await until(lambda: delegation_rows(store)[0][3] == "delivered",
                                what="delivery")
                    # recorded, but it waits its turn: the session runs one turn at a time
                    assert [a[2] for a in admissions_of(store, sid)] == [
                        "terminal", "started", "queued"]
                    assert model.deliveries(fake) == []
                    hold.set()
                    await peer.wait_terminal(sid, busy["admission_id"])
                    delivered = await until(
                        lambda: [a for a in admissions_of(store, sid)
                                 if a[0] == "delegation" and a[2] == "terminal"],
                        what="the delivery turn")
        finally:
            release.set()
            hold.set()
    assert delivered[0][3] == "completed"
    # one turn at a time, in admission order: every start is followed by its own end
    marks = [(e["type"], e["admission_id"]) for e in peer.events
             if e["session_id"] == sid and e["type"] in ("message.start", "message.complete")]
    assert [t for t, _ in marks] == ["message.start", "message.complete"] * 3
    assert all(marks[i][1] == marks[i + 1][1] for i in range(0, 6, 2))
    assert len(model.deliveries(fake)) == 1
    assert "HELD_TURN_DONE" in json.dumps(model.deliveries(fake)[0]["messages"])


# -- the owner stops while background children run --------------------------------


def alpha_now_beta_blocks(release: threading.Event) -> ChildReply:
    """WORKER_ALPHA answers at once; WORKER_BETA waits for ``release``."""
    def reply(worker: str, req: dict) -> Reply:
        if worker == "WORKER_BETA":
            release.wait(timeout=25)
        return text_reply(f"{worker}_COMPLETE")

    return reply


async def dispatch_and_half_finish(peer: Peer, model: FanoutModel, fake: FakeProvider,
                                   sid: str) -> None:
    """A background delegation whose first child finished and second still runs."""
    first = await turn(peer, sid, "bg")
    assert first["result"]["text"] == DISPATCH_ACK, first
    await peer.wait_event(lambda e: e["type"] == "subagent.complete"
                          and e["payload"]["task_index"] == 0)
    await until(lambda: model.child_requests(fake, "WORKER_BETA"), what="the second child")


def assert_interrupted_delivery(store: Store, model: FanoutModel, fake: FakeProvider, sid: str,
                                final: dict) -> None:
    [(delegation_id, origin, state, delivery, result_json)] = delegation_rows(store)
    assert (origin, state, delivery) == (sid, "interrupted", "delivered")
    alpha, beta = json.loads(result_json)["results"]
    # the child that finished keeps its work; the one that was cut off says so
    assert (alpha["status"], alpha["summary"]) == ("completed", "WORKER_ALPHA_COMPLETE")
    assert beta["status"] == "interrupted" and beta["error"]
    assert admissions_of(store, sid) == [
        ("local", "bg", "terminal", "completed"),
        ("delegation", delegation_id, "terminal", "completed")]
    [delivery_request] = model.deliveries(fake)
    assert "interrupted" in users(delivery_request)[-1]
    assert final["messages"][-1]["content"] == BACKGROUND_NOT_JOINED


async def test_kill9_with_children_running_delivers_interrupted_once(tmp_path, store_url):
    home = tmp_path / "home"
    store, env = Store(home, store_url), owner_env(home, store_url)
    release = threading.Event()
    model = FanoutModel(child=alpha_now_beta_blocks(release))
    with FakeProvider(model) as fake:
        write_config(home, fake.url, delegation={"model": "child-model"})
        try:
            with OwnerProcess(home, env=env) as owner:
                async with await Peer.connect(home) as peer:
                    bystander = (await peer.result("session.create", title="bystander"))[
                        "session_id"]
                    await turn(peer, bystander, "chat", text=f"{HOLD} unrelated")
                    sid = (await peer.result("session.create", title="origin"))["session_id"]
                    await dispatch_and_half_finish(peer, model, fake, sid)
                    before = await peer.result("session.resume", session_id=bystander)
                owner.kill()
            assert [r[2] for r in delegation_rows(store)] == ["running"]
            with OwnerProcess(home, env=env):
                await until(lambda: [a for a in admissions_of(store, sid)
                                     if a[0] == "delegation" and a[2] == "terminal"],
                            what="the interrupted delegation's delivery")
                async with await Peer.connect(home) as peer:
                    final = await peer.result("session.resume", session_id=sid)
                    after = await peer.result("session.resume", session_id=bystander)
                    events = await peer.all_events(sid)
        finally:
            release.set()
    assert_interrupted_delivery(store, model, fake, sid, final)
    # the child cut off by the crash ends for viewers too, and names the model it ran on
    started = {e["payload"]["task_index"] for e in events if e["type"] == "subagent.start"}
    ended = {e["payload"]["task_index"]: e["payload"]["status"] for e in events
             if e["type"] == "subagent.complete"}
    assert started == set(ended) == {0, 1} and ended[1] == "interrupted"
    results = json.loads(delegation_rows(store)[0][4])["results"]
    assert [r["model"] for r in results] == ["child-model", "child-model"]
    # nothing went anywhere else
    assert admissions_of(store, bystander) == [("local", "chat", "terminal", "completed")]
    assert (after["last_seq"], after["messages"]) == (before["last_seq"], before["messages"])


async def test_shutdown_with_children_running_records_interrupted_and_delivers(tmp_path, store_url):
    home = tmp_path / "home"
    store, env = Store(home, store_url), owner_env(home, store_url)
    release = threading.Event()
    model = FanoutModel(child=alpha_now_beta_blocks(release))
    with FakeProvider(model) as fake:
        write_config(home, fake.url, daemon={"grace_seconds": 0.2})
        try:
            with OwnerProcess(home, env=env) as owner:
                async with await Peer.connect(home) as peer:
                    sid = (await peer.result("session.create"))["session_id"]
                    await dispatch_and_half_finish(peer, model, fake, sid)
                assert owner.stop() == 0
            # recorded and delivered during the drain; the follow-up turn waits for an owner
            [(_, _, state, delivery, _)] = delegation_rows(store)
            assert (state, delivery) == ("interrupted", "delivered")
            assert [a[2] for a in admissions_of(store, sid)] == ["terminal", "queued"]
            assert model.deliveries(fake) == []
            with OwnerProcess(home, env=env):
                await until(lambda: [a for a in admissions_of(store, sid)
                                     if a[0] == "delegation" and a[2] == "terminal"],
                            what="the delivery turn after restart")
                async with await Peer.connect(home) as peer:
                    final = await peer.result("session.resume", session_id=sid)
        finally:
            release.set()
    assert_interrupted_delivery(store, model, fake, sid, final)


async def test_children_are_bounded_across_the_owner(scene):
    """Two sessions delegate at once: delegation.max_running_children bounds the
    children of both together, and the rest wait for a slot instead of failing."""
    # each child stays in flight a while, so that without the bound a third child
    # would join (and be counted) before it leaves
    child, in_flight = overlapping_child(until_most=3, timeout=1.0)
    model = FanoutModel(child=child)
    async with scene(model, session=False, delegation={"max_concurrent_children": 2,
                                                       "max_running_children": 2}) as s:
        peer = s.peer
        sids = [(await peer.result("session.create"))["session_id"] for _ in range(2)]
        receipts = [await peer.result("prompt.submit", session_id=sid, input_id="f",
                                      text=PROMPT, finite=True) for sid in sids]
        done = [await peer.wait_terminal(sid, r["admission_id"])
                for sid, r in zip(sids, receipts, strict=True)]
    assert [d["result"]["text"] for d in done] == [JOINED, JOINED], done
    assert in_flight[1] == 2  # four children in all, never more than two at once
