"""Pure admission-ledger logic: canonical payloads, digests, receipts, transitions.

No I/O here. The admission service (``daemon/admissions.py``) wraps these in
store units; tests exercise them directly.

Status machine (SPEC §3, §4, §7)::

    queued ──start──▶ started ──finish──▶ terminal(completed|failed|cancelled|interrupted)
      │                  │
      │cancel            └─owner crash, next epoch─▶ unknown ──resolve──▶ terminal(interrupted)
      └──────────────────────────────────────────────────────────▶ terminal(cancelled)
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

__all__ = [
    "canonical_payload", "encode_payload", "digest", "receipt_from_row", "retry_params",
    "TERMINAL", "OUTCOMES", "can_cancel", "can_resolve",
]

TERMINAL = "terminal"
OUTCOMES = ("completed", "failed", "cancelled", "interrupted")
TURN_OPTION_KEY = "cli_turn_v1"


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


def encode_payload(payload: dict[str, Any]) -> str:
    """Canonical JSON: sorted keys, compact, UTF-8."""
    return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode()


def digest(payload_json: str) -> str:
    return hashlib.sha256(payload_json.encode()).hexdigest()


def retry_params(session_id: str, request_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Rebuild the exact prompt.submit params from a stored row (SPEC §4)."""
    params = {"session_id": session_id, "input_id": request_id}
    params.update({k: v for k, v in payload.items() if k != TURN_OPTION_KEY})
    params.update(payload.get(TURN_OPTION_KEY, {}))
    return params


def receipt_from_row(row: dict[str, Any]) -> dict[str, Any]:
    """The wire receipt of a ledger row."""
    terminal = row["status"] == TERMINAL
    result = None
    if terminal and row.get("result_json"):
        stored = orjson.loads(row["result_json"])
        # the wire TurnResult always has all three keys (error null on success)
        result = {"text": stored.get("text") or "", "usage": stored.get("usage") or {},
                  "error": stored.get("error")}
    return {
        "admission_id": row["admission_id"],
        "session_id": row["target_session_id"],
        "input_id": row["request_id"],
        "status": row["status"],
        "outcome": row["outcome"] if terminal else None,
        "result": result,
    }


def can_cancel(status: str) -> bool:
    return status in ("queued", "started")


def can_resolve(status: str) -> bool:
    return status == "unknown"
