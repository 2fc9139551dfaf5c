"""The event envelope: how one entry of a session's event log looks on the wire (SPEC §6).

An event is ``{session_id, seq, type, payload, admission_id}``: the params of an
``event`` notification, an item of ``session.events.since`` and of a snapshot's
``events``. ``event_envelope`` builds one; ``replay_gap`` builds the notice that
tells a viewer it missed events after ``last_seq`` and must replay them (the
owner sends it when it drops a slow viewer, a client makes one when it drops its
own buffer). Both sides build envelopes here, as plain dicts; ``models.Event``
validates the same shape where pydantic is loaded anyway.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "EVENT_TYPES",
    "GAP_CLIENT_QUEUE_OVERFLOW",
    "GAP_VIEWER_QUEUE_OVERFLOW",
    "NOTICE_TYPES",
    "REPLAY_GAP",
    "event_envelope",
    "fs_request",
    "terminal_request",
    "is_replay_gap",
    "replay_gap",
]

#: the notice that events after its ``payload.last_seq`` were not delivered
REPLAY_GAP = "session.replay_gap"

#: every event type an owner of this protocol sends (``models.Event`` lists the
#: payload of each); a client must still accept types it does not know
EVENT_TYPES: tuple[str, ...] = (
    "session.info",
    "message.start",
    "message.delta",
    "reasoning.delta",
    "tool.start",
    "tool.complete",
    "tool.progress",
    "subagent.start",
    "subagent.complete",
    "delegation.dispatched",
    "delegation.complete",
    "message.complete",
    "approval.requested",
    "approval.resolved",
    "process.complete",
    REPLAY_GAP,
    "cron.notice",
    "model.retry",
    "session.compacted",
    "fs.request",
    "terminal.request",
)

#: a notice goes to one viewer and is never stored: its ``seq`` is null (the replay
#: gap; ``fs.request`` and ``terminal.request``, a tool asking the editor that
#: offered: docs/protocol.md)
NOTICE_TYPES: frozenset[str] = frozenset({REPLAY_GAP, "fs.request", "terminal.request"})

#: replay_gap reasons: the owner unsubscribed a viewer whose event queue was full
GAP_VIEWER_QUEUE_OVERFLOW = "viewer_queue_overflow"
#: ... a client dropped events it had buffered for a consumer that stopped reading
GAP_CLIENT_QUEUE_OVERFLOW = "client_queue_overflow"


def event_envelope(
    session_id: str,
    seq: int,
    type: str,
    payload: dict[str, Any],
    admission_id: str | None = None,
) -> dict[str, Any]:
    """One event as it goes on the wire; ``admission_id`` is always present (may be null)."""
    return {
        "session_id": session_id,
        "seq": seq,
        "type": type,
        "payload": payload,
        "admission_id": admission_id,
    }


def replay_gap(session_id: str, last_seq: int, reason: str) -> dict[str, Any]:
    """The ``session.replay_gap`` notice: events after ``last_seq`` must be replayed.

    It is a notice, not an entry of the durable log, and its envelope says so: its
    ``seq`` is null (never the seq of a stored event, so a client that dedupes or
    orders by seq cannot drop it or mistake it for one), ``payload.last_seq`` is the
    seq of the last event delivered before the gap, and ``admission_id`` is null.
    """
    return {
        "session_id": session_id,
        "seq": None,
        "type": REPLAY_GAP,
        "payload": {"last_seq": last_seq, "reason": reason},
        "admission_id": None,
    }


def is_replay_gap(event: dict[str, Any]) -> bool:
    """Whether ``event`` is the replay-gap notice (its seq is null, its type says so)."""
    return event.get("type") == REPLAY_GAP and event.get("seq") is None


def fs_request(session_id: str, admission_id: str | None, payload: dict[str, Any]) -> dict[str, Any]:
    """The ``fs.request`` notice: a file tool of ``admission_id``'s turn asks the viewer
    that offered (fs.offer) to read or write a file; like the gap, no seq of its own."""
    return {"session_id": session_id, "seq": None, "type": "fs.request", "payload": payload,
            "admission_id": admission_id}


def terminal_request(session_id: str, admission_id: str | None,
                     payload: dict[str, Any]) -> dict[str, Any]:
    """The ``terminal.request`` notice: the terminal tool of ``admission_id``'s turn asks
    the viewer that offered (terminal.offer) to do one step of running a sandboxed
    command in its editor's terminal; like the gap, no seq of its own."""
    return {"session_id": session_id, "seq": None, "type": "terminal.request",
            "payload": payload, "admission_id": admission_id}
