"""Joining a session mid-turn: the transcript up to the running turn, then that turn's
events from its ``message.start``, so a viewer sees the partial answer so far and the
rest streams on (``tether attach``, ``tether chat --resume``).
"""

from __future__ import annotations

from typing import Any

from .client import SessionStream

__all__ = ["open_session", "LOOKBACK_EVENTS"]

#: how far back from the latest event the running turn's start is looked for first
LOOKBACK_EVENTS = 2000


async def _start_seq(client: Any, session_id: str, admission_id: str, last_seq: int) -> int | None:
    for after in (max(0, last_seq - LOOKBACK_EVENTS), 0):
        found = None
        async for event in client.all_events_since(session_id, after):
            if event.get("type") == "message.start" and event.get("admission_id") == admission_id:
                found = event["seq"]
            if event["seq"] >= last_seq:
                break
        if found is not None or after == 0:
            return found
    return None


async def open_session(client: Any, session_id: str) -> tuple[SessionStream, dict[str, Any],
                                                               list[dict[str, Any]]]:
    """(stream, snapshot, transcript to print). With a turn running, the stream starts at
    that turn's ``message.start`` and the transcript stops before its prompt."""
    probe = SessionStream(client, session_id)
    snap = await client.resilient(probe.open)
    running = snap.get("running")
    messages = list(snap.get("messages") or [])
    if not running:
        return probe, snap, messages
    start = await client.resilient(lambda: _start_seq(client, session_id, running,
                                                      snap["last_seq"]))
    if start is None:
        return probe, snap, messages
    probe.close()
    stream = SessionStream(client, session_id, after_seq=start - 1)
    snap = await client.resilient(stream.open)
    cut = next((i for i, m in enumerate(messages) if m.get("admission_id") == running),
               len(messages))
    return stream, snap, messages[:cut]
