"""The admission ledger's rules, with no I/O: states, transitions, payloads, receipts.

Every change of an admission's status is one of the events below, and this
table is the only place that says which status it may start from and where it
leads. The store's UPDATE statements take their ``WHERE status IN (...)`` from
`sources`; the services ask `decide_cancel` / `decide_resolve` what a request
means for a row in a given status. Tests walk every status × event.

Status machine (SPEC §3, §4, §7)::

                 start                finish
    (admit) ──▶ queued ──────────▶ started ──────────▶ terminal
                  │                   │   completed | failed | cancelled | interrupted
                  │ withdraw          │ orphan (the owner that started it is gone)
                  │ cancelled|failed  ▼
                  └──────────────▶ unknown ──resolve──▶ terminal (interrupted)
                                              ▲
                 terminal ◀───────────────────┘

``withdraw`` ends an admission that never ran: cancelled by request before its
turn began, or failed when its turn crashed before starting. ``orphan`` is the
only transition no request causes: a new owner epoch finds the row started by
an older one (SPEC §7) and cannot know what happened, so it never replays it.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any

import orjson

__all__ = [
    "Status", "Event", "IllegalTransition", "TRANSITIONS", "OUTCOMES", "TERMINAL",
    "TURN_OPTION_KEY", "next_status", "sources", "outcomes", "check", "CancelAction", "decide_cancel",
    "decide_resolve", "canonical_payload", "user_text", "input_messages", "encode_payload", "digest",
    "result_json", "receipt_from_row",
]


class Status(StrEnum):
    QUEUED = "queued"
    STARTED = "started"
    UNKNOWN = "unknown"
    TERMINAL = "terminal"


class Event(StrEnum):
    START = "start"
    FINISH = "finish"
    WITHDRAW = "withdraw"
    ORPHAN = "orphan"
    RESOLVE = "resolve"


TERMINAL = Status.TERMINAL.value
OUTCOMES = ("completed", "failed", "cancelled", "interrupted")
TURN_OPTION_KEY = "cli_turn_v1"

#: (status, event) → (next status, the outcomes it may record; empty: none)
TRANSITIONS: dict[tuple[Status, Event], tuple[Status, tuple[str, ...]]] = {
    (Status.QUEUED, Event.START): (Status.STARTED, ()),
    (Status.QUEUED, Event.WITHDRAW): (Status.TERMINAL, ("cancelled", "failed")),
    (Status.STARTED, Event.FINISH): (Status.TERMINAL, OUTCOMES),
    (Status.STARTED, Event.ORPHAN): (Status.UNKNOWN, ()),
    (Status.UNKNOWN, Event.RESOLVE): (Status.TERMINAL, ("interrupted",)),
}


class IllegalTransition(ValueError):
    """An event that the ledger does not allow from a status (or with an outcome)."""


def next_status(status: str, event: Event) -> Status:
    """Where ``event`` leads from ``status``; IllegalTransition if nowhere."""
    try:
        return TRANSITIONS[(Status(status), event)][0]
    except (KeyError, ValueError):
        raise IllegalTransition(f"{event.value} is not allowed from {status!r}") from None


def check(status: str, event: Event, outcome: str | None = None) -> Status:
    """`next_status`, also checking that ``outcome`` is one the event may record."""
    target = next_status(status, event)
    allowed = TRANSITIONS[(Status(status), event)][1]
    if (outcome is not None or allowed) and outcome not in allowed:
        raise IllegalTransition(f"{event.value} from {status!r} cannot record {outcome!r}")
    return target


def outcomes(event: Event) -> tuple[str, ...]:
    """The outcomes ``event`` may record (empty: it records none)."""
    return next((allowed for (_, e), (_, allowed) in TRANSITIONS.items() if e is event), ())


def sources(event: Event) -> tuple[str, ...]:
    """The statuses ``event`` may start from: the store's ``WHERE status IN (...)``."""
    return tuple(s.value for (s, e) in TRANSITIONS if e is event)


class CancelAction(StrEnum):
    WITHDRAW = "withdraw"  # still queued: it ends cancelled without running
    STOP = "stop"  # its turn runs: stop it, and the turn records `cancelled`
    REFUSE = "refuse"  # unknown: only prompt.resolve_unknown may settle it
    NOTHING = "nothing"  # already terminal: the receipt is the answer


def decide_cancel(status: str) -> CancelAction:
    """What prompt.cancel does to an admission in ``status``."""
    s = Status(status)
    if s is Status.QUEUED:
        return CancelAction.WITHDRAW
    if s is Status.STARTED:
        return CancelAction.STOP
    if s is Status.UNKNOWN:
        return CancelAction.REFUSE
    return CancelAction.NOTHING


def decide_resolve(status: str) -> bool | None:
    """What prompt.resolve_unknown does: True resolve it, False nothing to do
    (terminal already), None refuse (it is not unknown: it runs or will run)."""
    s = Status(status)
    if (s, Event.RESOLVE) in TRANSITIONS:
        return True
    return False if s is Status.TERMINAL else None


# -- payloads and receipts -------------------------------------------------


def canonical_payload(text: str, finite: bool, options: dict[str, Any],
                      attachments: list[dict[str, Any]] | None = None,
                      extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the client submitted, minus session_id/input_id, options grouped.

    Options that were not sent (None) are left out, so a retry that omits them
    and one that sends null digest the same.
    """
    payload: dict[str, Any] = {"text": text, "finite": finite}
    sent = {k: v for k, v in options.items() if v is not None}
    if sent:
        payload[TURN_OPTION_KEY] = sent
    if attachments:
        payload["attachments"] = attachments
    if extra:
        payload.update(extra)
    return payload


def user_text(payload: dict[str, Any]) -> str:
    """The user message of an admission: its text plus any text attachments."""
    text = payload["text"]
    for a in payload.get("attachments") or ():
        text += f"\n\n[attachment {a['name']} ({a.get('mime_type', 'text/plain')})]\n{a['content']}"
    return text


def input_messages(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """What an admission adds to the transcript when its turn starts: the user
    message, or the results of an HTTP client's tools (``tool_results``: the
    client ran the calls that ended the previous turn)."""
    results = payload.get("tool_results")
    if results:
        return [{"role": "tool", "tool_call_id": r["tool_call_id"], "content": r["content"]}
                for r in results]
    return [{"role": "user", "content": user_text(payload)}]


def encode_payload(payload: dict[str, Any]) -> str:
    """Canonical JSON: sorted keys, compact, UTF-8."""
    return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode()


def digest(payload_json: str) -> str:
    return hashlib.sha256(payload_json.encode()).hexdigest()


def result_json(text: str, usage: dict[str, Any], error: str | None,
                extra: dict[str, Any] | None = None,
                tool_calls: list[dict[str, Any]] | None = None) -> str:
    """The stored result of a terminal admission (``error`` only when there is one;
    ``extra``: the model asked and the turn's cost_usd, for a turn that asked one;
    ``tool_calls``, the calls of an HTTP client's tools that ended the turn, likewise)."""
    result: dict[str, Any] = {"text": text, "usage": usage, **(extra or {})}
    if error:
        result["error"] = error
    if tool_calls:
        result["tool_calls"] = tool_calls
    return orjson.dumps(result).decode()


def receipt_from_row(row: dict[str, Any]) -> dict[str, Any]:
    """The wire receipt of a ledger row."""
    terminal = row["status"] == TERMINAL
    result = None
    if terminal and row.get("result_json"):
        stored = orjson.loads(row["result_json"])
        # the wire TurnResult always has all three keys (error null on success)
        # model and cost_usd: null for a turn that asked no model (or of an older owner)
        result = {"text": stored.get("text") or "", "usage": stored.get("usage") or {},
                  "error": stored.get("error"), "model": stored.get("model"),
                  "cost_usd": stored.get("cost_usd")}
    return {
        "admission_id": row["admission_id"],
        "session_id": row["target_session_id"],
        "input_id": row["request_id"],
        "status": row["status"],
        "outcome": row["outcome"] if terminal else None,
        "result": result,
    }
