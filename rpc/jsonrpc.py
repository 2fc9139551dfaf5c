"""JSON-RPC 2.0 messages as Python objects: the request a client sends, the result a
reply carries.

What ``framing`` turns into bytes with orjson, and what a client that writes its
frames with the standard library's json (the blocking one-shot client,
``tether.clients.library.blocking``) uses too, so both send the same request and
read a reply the same way. No JSON library is imported here.
"""

from __future__ import annotations

from typing import Any

from .errors import InternalError, RpcError
from .protocol import JSONRPC_VERSION

__all__ = ["params_data", "reply_result", "request_object"]


def params_data(params: Any) -> Any:
    """``params`` as plain data: a params model is dumped (``None`` fields left out,
    which every params model reads as "not sent"), anything else is kept."""
    if getattr(type(params), "__pydantic_serializer__", None) is not None:
        return params.model_dump(mode="json", exclude_none=True)
    return params


def request_object(id: str | int, method: str, params: Any = None) -> dict[str, Any]:
    """A request; ``params`` may be a params model or a dict, and is omitted when None."""
    msg: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION, "id": id, "method": method}
    body = params_data(params)
    if body is not None:
        msg["params"] = body
    return msg


def reply_result(reply: Any) -> Any:
    """The ``result`` of a parsed reply, or raise the ``RpcError`` subclass it carries;
    a reply with neither (a peer breaking the protocol) raises ``InternalError``."""
    if not isinstance(reply, dict):
        raise InternalError(f"malformed reply: expected an object, got {type(reply).__name__}")
    if "error" in reply:
        raise RpcError.from_wire(reply["error"])
    if "result" in reply:
        return reply["result"]
    raise InternalError("malformed reply: neither result nor error")
