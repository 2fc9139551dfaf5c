"""JSON-RPC 2.0 frames: encoding requests, notifications, events and replies; decoding replies.

The one codec of the wire, for the owner's dispatcher and for clients alike.
Everything here turns Python values into one frame's bytes or back; nothing
touches a socket. Messages are compact UTF-8 JSON written by orjson.

Nothing here imports pydantic (a client's start-up must not pay for it), yet
params, results and events may be given as pydantic models as well as plain
data: a model is recognised by the serializer pydantic attaches to its class
and is written by that serializer, so both forms give the same bytes.
"""

from __future__ import annotations

from typing import Any

import orjson

from .errors import ParseError, RpcError
from .jsonrpc import params_data, reply_result, request_object
from .protocol import EVENT_METHOD, JSONRPC_VERSION

__all__ = [
    "decode_reply",
    "encode_error",
    "encode_event",
    "encode_notification",
    "encode_request",
    "encode_result",
]

RequestId = str | int | None

# The reply envelope is spliced around an already-encoded result rather than built
# as a dict: it saves a model_dump plus a second walk of the result on every call.
_ID_HEAD = b'{"jsonrpc":' + orjson.dumps(JSONRPC_VERSION) + b',"id":'
_RESULT_KEY = b',"result":'
_ERROR_KEY = b',"error":'
_TAIL = b"}"
_EVENT_HEAD = (
    b'{"jsonrpc":' + orjson.dumps(JSONRPC_VERSION)
    + b',"method":' + orjson.dumps(EVENT_METHOD) + b',"params":'
)


def _serializer(value: Any) -> Any:
    """The pydantic serializer of ``value``'s class, or None if it is not a model."""
    return getattr(type(value), "__pydantic_serializer__", None)


def encode_request(id: str | int, method: str, params: Any = None) -> bytes:
    """A request frame; ``params`` may be a params model or a dict, and is omitted when None.

    Raises ``TypeError`` (orjson's ``JSONEncodeError``) when the params are not JSON,
    e.g. text holding lone surrogates.
    """
    return orjson.dumps(request_object(id, method, params))


def encode_notification(method: str, params: Any = None) -> bytes:
    """A notification frame (no ``id``: the receiver never replies)."""
    msg: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION, "method": method}
    body = params_data(params)
    if body is not None:
        msg["params"] = body
    return orjson.dumps(msg)


def encode_event(event: Any) -> bytes:
    """The ``event`` notification for one event; encode once, send to every viewer.

    ``event`` is an envelope dict (``envelope.event_envelope``, ``envelope.replay_gap``)
    or a ``models.Event``.
    """
    serializer = None if type(event) is dict else _serializer(event)
    body = orjson.dumps(event) if serializer is None else serializer.to_json(event)
    return b"".join((_EVENT_HEAD, body, _TAIL))


def encode_result(id: RequestId, result: Any) -> bytes:
    """A success reply. ``result`` is a model (serialised in JSON mode) or plain JSON data.

    Raises ``TypeError`` (orjson's ``JSONEncodeError``) or pydantic's
    ``PydanticSerializationError`` when the result cannot be encoded.
    """
    # The exact-type test first: dict results are the common cheap case (ping).
    serializer = None if type(result) is dict else _serializer(result)
    if serializer is not None:
        body = serializer.to_json(result)
        return b"".join((_ID_HEAD, orjson.dumps(id), _RESULT_KEY, body, _TAIL))
    return orjson.dumps({"jsonrpc": JSONRPC_VERSION, "id": id, "result": result})


def encode_error(id: RequestId, error: RpcError) -> bytes:
    """An error reply. Extras that are not JSON are dropped to their ``str`` form."""
    try:
        body = orjson.dumps(error.to_wire())
    except TypeError:
        # An error reply must always go out; a bad extra must not turn into a
        # second failure while reporting the first.
        body = orjson.dumps(error.to_wire(), default=str)
    return b"".join((_ID_HEAD, orjson.dumps(id), _ERROR_KEY, body, _TAIL))


def decode_reply(reply: dict[str, Any] | bytes | str) -> Any:
    """The ``result`` of a reply, or raise the ``RpcError`` subclass it carries.

    Accepts the parsed reply object or its raw frame. A frame that is not JSON
    raises ``ParseError``; a reply with neither ``result`` nor ``error`` (a peer
    breaking the protocol) raises ``InternalError``.
    """
    if isinstance(reply, bytes | bytearray | memoryview | str):
        try:
            reply = orjson.loads(reply)
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"reply is not JSON: {exc}") from None
    return reply_result(reply)
