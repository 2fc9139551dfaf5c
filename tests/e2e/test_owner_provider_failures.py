"""A misbehaving provider fails the turn, after bounded retries, with a reason the user
can read; the session's next turn still runs."""

import pytest
from fakeprovider import (
    Drip,
    Message,
    RawSSE,
    Stall,
    Status,
    prompt_of,
    text_reply,
)

MAX_RETRIES = 1


FAILURES = {
    "http-500": (lambda: Status(500, '{"error": {"message": "upstream exploded"}}'),
                 "server_error", MAX_RETRIES + 1),
    "http-429": (lambda: Status(429, '{"error": {"message": "slow down"}}', retry_after=0.05),
                 "rate_limited", MAX_RETRIES + 1),
    "stall": (lambda: Stall(5.0), "timeout", MAX_RETRIES + 1),
    # a stream that is not a chat completion is not transient: retrying cannot help
    "malformed-sse": (lambda: RawSSE(b"data: {this is not json\n\n"),
                      "malformed_response", 1),
    # a body that says it is gzip and is not cannot be read, however often it is asked for
    "false-gzip-stream": (lambda: Message({"role": "assistant", "content": "x"}, stream=True,
                                          headers={"Content-Encoding": "gzip"}),
                          "malformed_response", 1),
    "false-gzip-json": (lambda: Message({"role": "assistant", "content": "x"}, stream=False,
                                        headers={"Content-Encoding": "gzip"}),
                        "malformed_response", 1),
}


@pytest.mark.parametrize("kind", list(FAILURES))
async def test_provider_failure_fails_the_turn_and_the_next_one_runs(scene, kind):
    make_failure, reason, expected_requests = FAILURES[kind]

    def handler(req):
        if prompt_of(req) == "doomed":
            return make_failure()
        return text_reply("RECOVERED")

    async with scene(handler, model={
            "stream": True, "timeout_seconds": 1.0, "max_retries": MAX_RETRIES,
            "retry_backoff_seconds": 0.01}) as s:
        peer, sid = s.peer, s.session_id
        bad = await peer.result("prompt.submit", session_id=sid, input_id="bad",
                                text="doomed")
        good = await peer.result("prompt.submit", session_id=sid, input_id="good",
                                 text="fine")
        failed = await peer.wait_terminal(sid, bad["admission_id"])
        assert failed["outcome"] == "failed"
        assert failed["result"]["error"].startswith(reason), failed["result"]
        complete = await peer.wait_event(
            lambda e: e["type"] == "message.complete"
            and e["admission_id"] == bad["admission_id"])
        assert complete["payload"]["outcome"] == "failed"
        assert complete["payload"]["error"] == failed["result"]["error"]

        ok = await peer.wait_terminal(sid, good["admission_id"])
        assert ok["outcome"] == "completed"
        assert ok["result"]["text"] == "RECOVERED"
    provider = s.provider
    doomed = [r for r in provider.requests if prompt_of(r) == "doomed"]
    assert len(doomed) == expected_requests


async def test_a_model_request_that_never_finishes_fails_at_its_deadline(scene):
    """A server that keeps the stream alive with comments and never answers is never
    silent, so only the deadline of the whole request can end the turn."""

    def handler(req):
        if prompt_of(req) == "endless":
            return Drip(0.2)
        return text_reply("RECOVERED")

    model = {"stream": True, "timeout_seconds": 1.0, "request_timeout_seconds": 2.0,
             "max_retries": 2, "retry_backoff_seconds": 0.01}
    async with scene(handler, model=model) as s:
        provider, peer, sid = s.provider, s.peer, s.session_id
        bad = await peer.result("prompt.submit", session_id=sid, input_id="bad", text="endless")
        good = await peer.result("prompt.submit", session_id=sid, input_id="good", text="fine")
        failed = await peer.wait_terminal(sid, bad["admission_id"], timeout=20)
        assert failed["outcome"] == "failed"
        error = failed["result"]["error"]
        assert error.startswith("timeout: ") and "2 s" in error, error
        ok = await peer.wait_terminal(sid, good["admission_id"], timeout=20)
        assert ok["result"]["text"] == "RECOVERED"
    # the deadline bounds the request, retries included: it is spent, so no retry
    assert [prompt_of(r) for r in provider.requests] == ["endless", "fine"]
