"""A first turn through the real owner: submit, stream, complete, retry."""

from fakeprovider import text_reply


async def test_submit_runs_turn_and_retry_returns_same_receipt(scene):
    async with scene(lambda req: text_reply("ANSWER_42"), session={"title": "first"}) as s:
        peer, sid = s.peer, s.session_id
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
    assert len(s.provider.requests) == 1
    assert s.rows("SELECT status, outcome FROM session_admissions") == [
        ("terminal", "completed")]
