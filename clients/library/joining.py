"""Joining a session mid-turn: the transcript up to the running turn, then that turn's
events from its ``message.start``, so a viewer sees the partial answer so far and the
rest streams on (``tether attach``, ``tether chat --resume``); and how the transcript's
turns that did not complete ended, so they are shown as the live chat showed them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .client import SessionStream

__all__ = ["open_session", "unfinished_turns", "LOOKBACK_EVENTS", "RECEIPTS_AT_ONCE"]

#: how far back from the latest event the running turn's start is looked for first
LOOKBACK_EVENTS = 2000
#: receipts asked for at once when a transcript is shown again
RECEIPTS_AT_ONCE = 16


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


async def unfinished_turns(client: Any, session_id: str,
                           messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The receipts (by admission id) of the turns in ``messages`` that did not complete.

    The transcript does not say how a turn ended; its receipt does. A turn whose last
    message is an answer (an assistant message with text and no tool calls) completed:
    a cancelled, interrupted or failed turn records no answer, so only the others'
    receipts are asked for: none at all for a session whose turns all completed.
    """
    last: dict[str, dict[str, Any]] = {}
    for m in messages:
        if aid := m.get("admission_id"):
            last[aid] = m
    ask = [aid for aid, m in last.items() if not (
        m.get("role") == "assistant" and m.get("content") and not m.get("tool_calls"))]
    found: dict[str, dict[str, Any]] = {}
    for i in range(0, len(ask), RECEIPTS_AT_ONCE):
        batch = ask[i:i + RECEIPTS_AT_ONCE]
        receipts = await client.resilient(lambda b=batch: asyncio.gather(
            *(client.receipt(session_id, admission_id=aid) for aid in b)))
        for receipt in receipts:
            if receipt.get("status") != "terminal" or receipt.get("outcome") != "completed":
                found[receipt["admission_id"]] = receipt
    return found
