"""The admission ledger through the real owner: receipts, idempotent retry, conflicts,
strict params, concurrent duplicates, the stored payload, cancel and interrupt."""

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from fakeprovider import FakeProvider, prompt_of, text_reply


def asked(provider: FakeProvider, text: str) -> int:
    """How many requests the provider got whose newest user message is ``text``."""
    return sum(1 for r in provider.requests if prompt_of(r) == text)


def echo(req: dict):
    return text_reply("ECHO:" + prompt_of(req))


def gated_echo() -> tuple[Callable[[dict], Any], threading.Event]:
    """An echoing provider handler that holds every request until the gate opens
    (or 10 s pass), so a turn can be caught while it runs."""
    gate = threading.Event()

    def handler(req: dict) -> Any:
        gate.wait(10)
        return echo(req)

    return handler, gate


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
async def test_turn_completes_with_the_providers_answer(scene, store, stream):
    async with scene(lambda req: text_reply("The answer is forty-two."),
                     model={"stream": stream}) as s:
        provider, peer, sid = s.provider, s.peer, s.session_id
        receipt = await peer.result("prompt.submit", session_id=sid, input_id="in-1",
                                    text="what is the answer?")
        assert receipt["session_id"] == sid and receipt["input_id"] == "in-1"
        assert receipt["admission_id"]
        # an idle session's turn starts in its admission's commit on a single owner;
        # a fleet's node starts it under the session's lease, in a commit of its own
        assert receipt["status"] == ("started" if store == "sqlite" else "queued")
        assert receipt["outcome"] is None and receipt["result"] is None

        done = await peer.wait_terminal(sid, receipt["admission_id"])
        assert done["outcome"] == "completed"
        assert done["result"]["text"] == "The answer is forty-two."
        assert done["result"]["error"] is None
        assert done["result"]["usage"]["completion_tokens"] > 0

        complete = await peer.wait_event(lambda e: e["type"] == "message.complete")
        mine = [e for e in peer.events if e["admission_id"] == receipt["admission_id"]]
        deltas = "".join(e["payload"]["text"] for e in mine
                         if e["type"] == "message.delta")
        assert deltas == "The answer is forty-two."
        assert complete["payload"]["text"] == "The answer is forty-two."
        assert mine[0]["type"] == "message.start"

        snap = await peer.result("session.resume", session_id=sid)
        assert [(m["role"], m["content"]) for m in snap["messages"]] == [
            ("user", "what is the answer?"), ("assistant", "The answer is forty-two.")]
    assert [r["stream"] for r in provider.requests] == [stream]


@pytest.mark.both_transports
async def test_resubmitting_an_input_id_never_runs_it_twice(scene):
    handler, gate = gated_echo()
    async with scene(handler) as s:
        provider, sid = s.provider, s.session_id
        async with s.peer as peer:
            first = await peer.result("prompt.submit", session_id=sid, input_id="once",
                                      text="run me once", finite=True)
            await peer.wait_event(lambda e: e["type"] == "message.start")
            # while it runs: the retry answers the same admission, now started
            running = await peer.result("prompt.submit", session_id=sid, input_id="once",
                                        text="run me once", finite=True)
            assert running["admission_id"] == first["admission_id"]
            assert running["status"] == "started"
            gate.set()
            await peer.wait_terminal(sid, first["admission_id"])
        # a retry from a new connection, after the turn ended
        async with await s.connect() as other:
            again = await other.result("prompt.submit", session_id=sid, input_id="once",
                                       text="run me once", finite=True)
            assert again["admission_id"] == first["admission_id"]
            assert again["status"] == "terminal"
            assert again["outcome"] == "completed"
            assert again["result"]["text"] == "ECHO:run me once"
            by_input = await other.result("prompt.receipt", session_id=sid,
                                          input_id="once")
            assert by_input == again
    assert asked(provider, "run me once") == 1
    assert s.rows("SELECT COUNT(*) FROM session_admissions") == [(1,)]


async def test_changed_payload_is_a_conflict_naming_the_admission(scene):
    async with scene(echo) as s:
        provider, peer, sid = s.provider, s.peer, s.session_id
        first = await peer.result("prompt.submit", session_id=sid, input_id="x",
                                  text="hello", finite=True)
        for changed in ({"text": "hello", "finite": False},
                        {"text": "hello!", "finite": True},
                        {"text": "hello", "finite": True, "model": "other"}):
            reply = await peer.call("prompt.submit", session_id=sid, input_id="x",
                                    **changed)
            err = reply["error"]
            assert err["code"] == -32009
            assert err["message"] == err["data"]["reason"] == "admission_conflict"
            assert err["data"]["admission_id"] == first["admission_id"]
        await peer.wait_terminal(sid, first["admission_id"])
    assert asked(provider, "hello") == 1
    assert s.rows("SELECT COUNT(*) FROM session_admissions") == [(1,)]


async def test_params_are_validated_strictly_and_nothing_is_stored(scene):
    async with scene(echo) as s:
        peer, sid = s.peer, s.session_id
        bad = [
            ({"finite": "true"}, "finite", "bool_type"),
            ({"colour": "blue"}, "colour", "extra_forbidden"),
            ({"max_turns": "3"}, "max_turns", "int_type"),
            ({"text": 7}, "text", "string_type"),
            # values no turn could run with are refused now, not failed later
            ({"provider": "opnai"}, "provider", "value_error"),
            ({"toolsets": ["no-such-toolset"]}, "toolsets", "value_error"),
            ({"base_url": "http://127.0.0.1:99999/v1"}, "base_url", "value_error"),
            ({"base_url": "http://[::1"}, "base_url", "value_error"),
        ]
        for extra, loc, kind in bad:
            params = {"session_id": sid, "input_id": "strict", "text": "hi", **extra}
            err = (await peer.call("prompt.submit", **params))["error"]
            assert err["code"] == -32602 and err["message"] == "invalid_params"
            assert {"loc": loc, "type": kind}.items() <= err["data"]["fields"][0].items()
        for bad_default in ({"provider": "opnai"}, {"toolsets": ["nope"]},
                            {"base_url": "ftp://host/v1"}):
            err = (await peer.call("session.create", **bad_default))["error"]
            assert err["message"] == "invalid_params"
        missing = (await peer.call("prompt.submit", session_id=sid, text="hi"))["error"]
        assert missing["data"]["fields"][0]["loc"] == "input_id"
        # the input_id is still free: nothing was recorded for it
        ok = await peer.result("prompt.submit", session_id=sid, input_id="strict",
                               text="hi")
        await peer.wait_terminal(sid, ok["admission_id"])
    assert s.rows("SELECT request_id FROM session_admissions") == [("strict",)]
    assert s.rows("SELECT COUNT(*) FROM sessions") == [(1,)]


@pytest.mark.both_transports
async def test_concurrent_identical_submissions_make_one_row_and_one_run(scene):
    async with scene(echo) as s:
        provider, creator, sid = s.provider, s.peer, s.session_id
        peers = [await s.connect() for _ in range(4)]
        try:
            params = {"session_id": sid, "input_id": "race", "text": "only once",
                      "finite": True}
            receipts = await asyncio.gather(
                *(peers[i % 4].result("prompt.submit", **params) for i in range(32)))
            assert len({r["admission_id"] for r in receipts}) == 1
            done = await creator.wait_terminal(sid, receipts[0]["admission_id"])
            assert done["result"]["text"] == "ECHO:only once"
        finally:
            for p in peers:
                await p.close()
    assert asked(provider, "only once") == 1
    assert s.rows("SELECT COUNT(*) FROM session_admissions") == [(1,)]


async def test_stored_payload_is_canonical_and_rebuilds_the_exact_retry(scene):
    async with scene(echo) as s:
        provider, sid = s.provider, s.session_id
        async with s.peer as peer:
            sent = {"text": "Grüße, options", "finite": True, "model": "test-model-b",
                    "max_turns": 3, "ignore_rules": True, "toolsets": []}
            first = await peer.result("prompt.submit", session_id=sid, input_id="canon",
                                      **sent)
            await peer.wait_terminal(sid, first["admission_id"])
            plain = await peer.result("prompt.submit", session_id=sid, input_id="plain",
                                      text="no options")
            await peer.wait_terminal(sid, plain["admission_id"])

        [(sess, request_id, payload_json)] = s.rows(
            "SELECT target_session_id, request_id, payload_json "
                  "FROM session_admissions WHERE request_id = 'canon'")
        payload = json.loads(payload_json)
        assert payload == {"text": "Grüße, options", "finite": True,
                           "cli_turn_v1": {"model": "test-model-b", "max_turns": 3,
                                           "ignore_rules": True, "toolsets": []}}
        # canonical: sorted keys at every level, no whitespace, UTF-8 kept as is
        assert payload_json == json.dumps(payload, sort_keys=True, separators=(",", ":"),
                                          ensure_ascii=False)
        [(plain_json,)] = s.rows("SELECT payload_json FROM session_admissions "
                                 "WHERE request_id = 'plain'")
        assert plain_json == '{"finite":false,"text":"no options"}'

        # a client that lost everything but the row rebuilds its retry (SPEC §4)
        retry = {"session_id": sess, "input_id": request_id}
        retry.update({k: v for k, v in payload.items() if k != "cli_turn_v1"})
        retry.update(payload["cli_turn_v1"])
        async with await s.connect() as fresh:
            again = await fresh.result("prompt.submit", **retry)
            assert again["admission_id"] == first["admission_id"]
            assert again["status"] == "terminal" and again["outcome"] == "completed"
    assert asked(provider, "Grüße, options") == 1
    assert provider.requests[0]["model"] == "test-model-b"


async def test_cancel_a_queued_admission_and_interrupt_the_running_one(scene):
    gate = threading.Event()

    def handler(req):
        if prompt_of(req) == "slow":
            gate.wait(10)
        return echo(req)

    async with scene(handler) as s:
        provider, sid = s.provider, s.session_id
        async with s.peer as peer:
            slow = await peer.result("prompt.submit", session_id=sid, input_id="a",
                                     text="slow")
            doomed = await peer.result("prompt.submit", session_id=sid, input_id="b",
                                       text="never runs")
            after = await peer.result("prompt.submit", session_id=sid, input_id="c",
                                      text="runs later")
            await peer.wait_event(lambda e: e["type"] == "message.start")

            cancelled = await peer.result("prompt.cancel", session_id=sid,
                                          admission_id=doomed["admission_id"])
            assert cancelled["status"] == "terminal"
            assert cancelled["outcome"] == "cancelled"
            # cancelling again is harmless and changes nothing
            again = await peer.result("prompt.cancel", session_id=sid,
                                      admission_id=doomed["admission_id"])
            assert again == cancelled

            stopped = await peer.result("session.interrupt", session_id=sid)
            assert stopped == {"interrupted": True, "admission_id": slow["admission_id"]}
            r = await peer.wait_terminal(sid, slow["admission_id"])
            assert r["outcome"] == "cancelled"
            gate.set()

            r = await peer.wait_terminal(sid, after["admission_id"])
            assert r["outcome"] == "completed" and r["result"]["text"] == "ECHO:runs later"
            nothing = await peer.result("session.interrupt", session_id=sid)
            assert nothing == {"interrupted": False, "admission_id": None}

            completes = [(e["admission_id"], e["payload"]["outcome"]) for e in peer.events
                         if e["type"] == "message.complete"]
            assert completes == [(doomed["admission_id"], "cancelled"),
                                 (slow["admission_id"], "cancelled"),
                                 (after["admission_id"], "completed")]
    assert asked(provider, "never runs") == 0
    assert asked(provider, "runs later") == 1


async def test_cancel_of_the_started_admission_interrupts_it(scene):
    handler, gate = gated_echo()
    try:
        async with scene(handler) as s:
            peer, sid = s.peer, s.session_id
            r = await peer.result("prompt.submit", session_id=sid, input_id="a",
                                  text="stuck")
            await peer.wait_event(lambda e: e["type"] == "message.start")
            out = await peer.result("prompt.cancel", session_id=sid,
                                    admission_id=r["admission_id"])
            assert out["status"] == "terminal" and out["outcome"] == "cancelled"
            snap = await peer.result("session.resume", session_id=sid)
            assert snap["running"] is None and snap["pending"] == []
    finally:
        gate.set()


async def test_resolve_unknown_refuses_admissions_that_are_not_unknown(scene):
    handler, gate = gated_echo()
    try:
        async with scene(handler) as s:
            peer, sid = s.peer, s.session_id
            running = await peer.result("prompt.submit", session_id=sid,
                                        input_id="a", text="first")
            queued = await peer.result("prompt.submit", session_id=sid,
                                       input_id="b", text="second")
            await peer.wait_event(lambda e: e["type"] == "message.start")
            for r, status in ((running, "started"), (queued, "queued")):
                err = (await peer.call("prompt.resolve_unknown", session_id=sid,
                                       admission_id=r["admission_id"]))["error"]
                assert err["message"] == "invalid_params", err
                now = await peer.result("prompt.receipt", session_id=sid,
                                        admission_id=r["admission_id"])
                assert now["status"] == status
            gate.set()
            done = await peer.wait_terminal(sid, queued["admission_id"])
            assert done["outcome"] == "completed"
    finally:
        gate.set()


async def test_unknown_ids_are_not_found(scene):
    async with scene(echo) as s:
        peer, sid = s.peer, s.session_id
        calls = [
            ("session.resume", {"session_id": "ses_nope"}),
            ("session.events.since", {"session_id": "ses_nope", "after_seq": 0}),
            ("session.interrupt", {"session_id": "ses_nope"}),
            ("session.detach", {"session_id": "ses_nope"}),
            ("prompt.submit", {"session_id": "ses_nope", "input_id": "i", "text": "t"}),
            ("prompt.receipt", {"session_id": sid, "admission_id": "adm_nope"}),
            ("prompt.receipt", {"session_id": sid, "input_id": "nope"}),
            ("prompt.cancel", {"session_id": sid, "admission_id": "adm_nope"}),
            ("prompt.resolve_unknown", {"session_id": sid, "admission_id": "adm_nope"}),
        ]
        for method, params in calls:
            err = (await peer.call(method, **params))["error"]
            assert (err["code"], err["message"]) == (-32004, "not_found"), method
        # an admission of one session is not reachable through another
        other = (await peer.result("session.create"))["session_id"]
        r = await peer.result("prompt.submit", session_id=sid, input_id="i", text="t")
        err = (await peer.call("prompt.receipt", session_id=other,
                               admission_id=r["admission_id"]))["error"]
        assert err["message"] == "not_found"
        await peer.wait_terminal(sid, r["admission_id"])
    assert s.rows("SELECT target_session_id FROM session_admissions") == [(sid,)]


@pytest.mark.both_transports
async def test_session_info_lists_every_pending_admission_of_a_burst(scene):
    """Submissions committed in one group: each session.info shows the queue as it
    is after its admission, the ones of the same group before it included."""
    handler, gate = gated_echo()
    async with scene(handler) as s:
        peer, sid = s.peer, s.session_id
        running = await peer.result("prompt.submit", session_id=sid, input_id="r",
                                    text="hold")
        # the turn's start announces it as running: everything up to there is old
        await peer.wait_event(lambda e: e["type"] == "session.info"
                              and e["payload"]["running"] == running["admission_id"])
        seen = len(peer.events)
        batch = [{"jsonrpc": "2.0", "id": f"b{i}", "method": "prompt.submit",
                  "params": {"session_id": sid, "input_id": f"b{i}", "text": f"t{i}"}}
                 for i in range(3)]
        await peer.send_raw(json.dumps(batch))
        await peer.wait_event(lambda e: e["type"] == "session.info"
                              and len(e["payload"]["pending"]) == 3)
        infos = [e["payload"] for e in peer.events[seen:] if e["type"] == "session.info"]
        gate.set()
        assert [len(i["pending"]) for i in infos] == [1, 2, 3], infos
        assert all(i["running"] == running["admission_id"] for i in infos)
        final = infos[-1]["pending"]
        assert infos[0]["pending"] == final[:1] and infos[1]["pending"] == final[:2]


async def test_a_retry_is_answered_after_a_restart_with_a_lower_text_limit(scene):
    async with scene(echo) as s:
        peer, sid = s.peer, s.session_id
        first = await peer.result("prompt.submit", session_id=sid, input_id="long",
                                  text="x" * 500)
        await peer.wait_terminal(sid, first["admission_id"])
    # the same home and store, restarted with a lower limit (nothing runs)
    async with scene(echo, home=s.home, session=False, daemon={"max_text_chars": 100}) as s2:
        peer = s2.peer
        again = await peer.result("prompt.submit", session_id=sid, input_id="long",
                                  text="x" * 500)
        assert again["admission_id"] == first["admission_id"]
        assert again["outcome"] == "completed"
        new = await peer.call("prompt.submit", session_id=sid, input_id="new",
                              text="x" * 500)
        assert new["error"]["message"] == "invalid_params"
