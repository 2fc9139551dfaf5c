"""Refusing a frame that will not run, under the ids of the requests it holds.

The dispatcher answers most failures after parsing; these are for frames it
cannot or will not parse strictly (text orjson refuses, a binary frame), read
leniently only to find the request ids, so a caller's promise settles instead of
waiting for a reply to id null.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import RpcError
from .framing import encode_error

__all__ = ["MAX_BATCH", "refusal", "unparsable"]

MAX_BATCH = 100  # requests per batch frame; more is invalid_request, not a partial run


def unparsable(frame: bytes | str, error: RpcError) -> bytes | None:
    """The reply to a frame orjson refused: with its request id when a lenient parse finds one.

    orjson refuses text holding a lone UTF-16 surrogate (``"\\ud83d"``, which
    ``JSON.stringify`` writes for a string cut in the middle of a pair). Such
    text is not Unicode and is never admitted, but the frame is otherwise JSON:
    the standard library's parser reads it, so the error can carry the id and
    the caller's promise settles instead of waiting for a reply to id null.
    """
    try:
        text = frame.decode("utf-8", "replace") if isinstance(frame, bytes) else frame
        loose = json.loads(text)
    except ValueError:
        # "If there was an error in detecting the id in the Request object
        # (e.g. Parse error/Invalid Request), it MUST be Null."
        return encode_error(None, error)
    return _refusal_of(loose, error)


def refusal(frame: bytes, error: RpcError) -> bytes | None:
    """``error`` for each request a frame that will not run holds, under its id."""
    try:
        loose = json.loads(frame.decode("utf-8", "replace"))
    except ValueError:
        return encode_error(None, error)
    return _refusal_of(loose, error)


def _request_id(msg: Any) -> str | int | None:
    rid = msg.get("id") if isinstance(msg, dict) else None
    return rid if type(rid) is str or type(rid) is int else None


def _refusal_of(loose: Any, error: RpcError) -> bytes | None:
    """``error`` once per request of ``loose`` (one object or a batch), under its id."""
    if isinstance(loose, list) and loose:
        # a batch: one error per member that expects a reply
        parts = [encode_error(_request_id(m), error) for m in loose[:MAX_BATCH]
                 if not (isinstance(m, dict) and "id" not in m)]
        return b"[" + b",".join(parts) + b"]" if parts else None
    if isinstance(loose, dict) and "id" not in loose and "method" in loose:
        return None  # a notification: never answered, not even with an error
    return encode_error(_request_id(loose), error)
