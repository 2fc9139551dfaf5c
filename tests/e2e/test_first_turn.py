"""A first turn through the real owner: submit, stream, complete, retry."""

from fakeprovider import FakeProvider, text_reply
from harness import OwnerProcess, Peer, db_rows, write_config


async def test_submit_runs_turn_and_retry_returns_same_receipt(tmp_path):
    home = tmp_path / "home"
    with FakeProvider(lambda req: text_reply("ANSWER_42")) as provider:
        write_config(home, provider.url)
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                snap = await peer.result("session.create", title="first")
                sid = snap["session_id"]
                receipt = await peer.result("prompt.submit", session_id=sid, input_id="in-1",
                                            text="hello")
                assert receipt["status"] in ("queued", "started", "terminal")
                done = await peer.wait_event(lambda e: e["type"] == "message.complete")
                assert done["payload"]["text"] == "ANSWER_42"
                assert done["payload"]["outcome"] == "completed"
                again = await peer.result("prompt.submit", session_id=sid, input_id="in-1",
                                          text="hello")
                assert again["admission_id"] == receipt["admission_id"]
                assert again["status"] == "terminal"
                assert again["result"]["text"] == "ANSWER_42"
        assert len(provider.requests) == 1
    assert db_rows(home, "SELECT status, outcome FROM session_admissions") == [
        ("terminal", "completed")]
