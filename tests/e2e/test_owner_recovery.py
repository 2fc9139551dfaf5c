"""Recovery after the owner is killed with SIGKILL during a running turn (SPEC §7)."""

import threading

from fakeprovider import FakeProvider, prompt_of, text_reply
from harness import OwnerProcess, Peer, write_config
from scene import Store, owner_env


async def test_kill_during_a_turn_leaves_it_unknown_and_pauses_only_its_session(tmp_path,
                                                                                store_url):
    home = tmp_path / "home"
    store, env = Store(home, store_url), owner_env(home, store_url)
    release = threading.Event()

    def handler(req):
        if prompt_of(req) == "side effects":
            release.wait(30)  # the owner dies while this request is in flight
        return text_reply("DONE:" + prompt_of(req))

    def asked(text: str) -> int:
        return sum(1 for r in provider.requests if prompt_of(r) == text)

    with FakeProvider(handler) as provider:
        write_config(home, provider.url, daemon={"max_running_turns": 1})
        first = OwnerProcess(home, env=env).start()
        try:
            async with await Peer.connect(home) as peer:
                done_sid = (await peer.result("session.create"))["session_id"]
                done = await peer.result("prompt.submit", session_id=done_sid,
                                         input_id="d", text="finished before")
                done = await peer.wait_terminal(done_sid, done["admission_id"])

                a = (await peer.result("session.create", title="A"))["session_id"]
                b = (await peer.result("session.create", title="B"))["session_id"]
                running = await peer.result("prompt.submit", session_id=a, input_id="a1",
                                            text="side effects")
                await peer.wait_event(lambda e: e["type"] == "message.start"
                                      and e["admission_id"] == running["admission_id"])
                follow1 = await peer.result("prompt.submit", session_id=a, input_id="a2",
                                            text="follow one")
                follow2 = await peer.result("prompt.submit", session_id=a, input_id="a3",
                                            text="follow two")
                # held queued by max_running_turns: 1
                other = await peer.result("prompt.submit", session_id=b, input_id="b1",
                                          text="other session")
                for r in (follow1, follow2, other):
                    assert r["status"] == "queued"
            first.proc.kill()
            first.proc.wait(10)
        finally:
            first.kill()
        acknowledged = {"d": done, "a1": running, "a2": follow1, "a3": follow2, "b1": other}

        with OwnerProcess(home, env=env) as second:
            assert second.descriptor["epoch"] == first.descriptor["epoch"] + 1
            async with await Peer.connect(home) as peer:
                # the other session's queued admission runs right after the restart
                r = await peer.wait_terminal(b, other["admission_id"])
                assert (r["outcome"], r["result"]["text"]) == ("completed",
                                                               "DONE:other session")

                got = {}
                for iid, before in acknowledged.items():
                    sid = before["session_id"]
                    got[iid] = await peer.result("prompt.receipt", session_id=sid,
                                                 input_id=iid)
                    assert got[iid]["admission_id"] == before["admission_id"]
                assert got["d"] == done
                assert got["a1"]["status"] == "unknown" and got["a1"]["outcome"] is None
                # A is paused behind its unknown admission: b1 ran, a2 (queued
                # earlier) did not
                assert got["a2"]["status"] == got["a3"]["status"] == "queued"

                # a retry of the started prompt answers `unknown` and runs nothing
                retry = await peer.result("prompt.submit", session_id=a, input_id="a1",
                                          text="side effects")
                assert retry == got["a1"]
                snap = await peer.result("session.resume", session_id=a)
                assert [p["receipt"]["admission_id"] for p in snap["pending"]] == [
                    running["admission_id"], follow1["admission_id"], follow2["admission_id"]]
                assert [p["text"] for p in snap["pending"]] == [
                    "side effects", "follow one", "follow two"]
                assert snap["running"] is None
                cancel = await peer.call("prompt.cancel", session_id=a,
                                         admission_id=running["admission_id"])
                assert cancel["error"]["message"] == "unknown_execution"
                # while paused, a new prompt is refused, naming what to resolve; the
                # queued ones may still be retried or cancelled
                refused = await peer.call("prompt.submit", session_id=a, input_id="a4",
                                          text="after resolving")
                assert refused["error"]["code"] == -32011
                assert refused["error"]["data"]["admission_id"] == running["admission_id"]
                assert (await peer.result("prompt.submit", session_id=a, input_id="a2",
                                          text="follow one")) == got["a2"]
                gone = await peer.result("prompt.cancel", session_id=a,
                                         admission_id=follow2["admission_id"])
                assert (gone["status"], gone["outcome"]) == ("terminal", "cancelled")
                assert (await peer.result("prompt.receipt", session_id=a,
                                          input_id="a2"))["status"] == "queued"

                resolved = await peer.result("prompt.resolve_unknown", session_id=a,
                                             admission_id=running["admission_id"])
                assert (resolved["status"], resolved["outcome"]) == ("terminal",
                                                                     "interrupted")
                assert resolved["result"]["error"]
                r = await peer.wait_terminal(a, follow1["admission_id"])
                assert r["outcome"] == "completed"
                # no longer paused: new prompts are admitted and run
                late = await peer.result("prompt.submit", session_id=a, input_id="a4",
                                         text="after resolving")
                r = await peer.wait_terminal(a, late["admission_id"])
                assert r["outcome"] == "completed"
                # resolving again is a harmless no-op that returns the same receipt
                again = await peer.result("prompt.resolve_unknown", session_id=a,
                                          admission_id=running["admission_id"])
                assert again == resolved

                # the transcript keeps the interrupted prompt, and the followers ran in order
                snap = await peer.result("session.resume", session_id=a)
                assert [(m["role"], m["content"]) for m in snap["messages"]] == [
                    ("user", "side effects"),
                    ("user", "follow one"), ("assistant", "DONE:follow one"),
                    ("user", "after resolving"), ("assistant", "DONE:after resolving")]
            assert second.stop() == 0
        release.set()

    assert asked("side effects") == 1
    assert asked("follow one") == asked("after resolving") == asked("other session") == 1
    assert asked("follow two") == 0
    if store_url is None:  # SQLite's own check of the file
        assert store.rows("PRAGMA integrity_check") == [("ok",)]
    assert store.rows("SELECT request_id, outcome FROM session_admissions ORDER BY seq") == [
        ("d", "completed"), ("a1", "interrupted"), ("a2", "completed"), ("a3", "cancelled"),
        ("b1", "completed"), ("a4", "completed")]
