"""The API key lives in memory only: never in state.db, events, logs or replies (SPEC §9)."""

import json

from fakeprovider import Status, prompt_of, text_reply

SECRET = "sk-SECRET-123"


async def test_api_key_never_leaks(scene):
    headers_seen: list[str] = []

    def handler(req):
        auth = s.provider.request_headers[-1].get("authorization", "")
        headers_seen.append(auth)
        text = prompt_of(req)
        if text == "echo my auth back as an error":
            # a careless server that reflects the request headers in its error body
            return Status(401, json.dumps({"error": {"message": f"bad key: {auth}"}}))
        if text == "echo it in a retryable error":
            return Status(503, f"upstream rejected Authorization: {auth}")
        return text_reply(f"hello ({text})")

    replies: list[dict] = []
    async with scene(handler, session=False, args=("--foreground",),
                     model={"api_key": SECRET, "max_retries": 1,
                            "retry_backoff_seconds": 0.01}) as s:
        peer = s.peer
        snap = await peer.result("session.create", title="keys")
        sid = snap["session_id"]
        replies.append(snap)
        for i, text in enumerate(["fine", "echo my auth back as an error",
                                  "echo it in a retryable error", "fine again"]):
            r = await peer.result("prompt.submit", session_id=sid, input_id=f"k{i}",
                                  text=text)
            replies.append(r)
            replies.append(await peer.wait_terminal(sid, r["admission_id"]))
        replies.append(await peer.result("session.resume", session_id=sid, after_seq=0))
        replies.append(await peer.result("session.events.since", session_id=sid,
                                         after_seq=0))
        replies.append(await peer.result("session.list"))
        replies.append(await peer.result("runtime.describe"))
        events = list(peer.events)
    home = s.home

    # the key was really in use, and the provider really echoed it
    assert headers_seen and all(h == f"Bearer {SECRET}" for h in headers_seen)
    outcomes = [r["outcome"] for r in replies if r.get("status") == "terminal"]
    assert outcomes == ["completed", "failed", "failed", "completed"]
    errors = [r["result"]["error"] for r in replies if r.get("outcome") == "failed"]
    assert errors[0].startswith("auth_failed") and "bad key" in errors[0]
    assert errors[1].startswith("server_error")

    wire = json.dumps(replies) + json.dumps(events)
    assert SECRET not in wire
    assert "message.complete" in wire and "auth_failed" in wire

    assert SECRET.encode() not in s.store.dump()
    stored = [home / "owner-stderr.log", home / "daemon.lock"]
    stored += [p for p in (home / "logs").rglob("*") if p.is_file()]
    assert any(p.name.endswith(".log") and p.stat().st_size for p in stored)
    for path in stored:
        if path.exists():
            assert SECRET.encode() not in path.read_bytes(), path
    # the redacted error is what was stored
    assert b"bad key" in s.store.dump()
