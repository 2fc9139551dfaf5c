"""How the HTTP endpoint fails: ``ApiError`` in OpenAI's error envelope.

Every refusal is ``{"error": {"message", "type", "code"}}`` with its status;
``from_rpc`` is the one place an owner error (the ledger's, the store's)
becomes an HTTP one.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from tether.rpc.errors import (
    AdmissionConflict,
    InvalidParams,
    NotFound,
    Overloaded,
    RpcError,
    RuntimeDraining,
    StorageUnavailable,
    UnknownExecution,
)
from tether.store import StorageError

__all__ = ["ApiError", "from_exception", "redact"]

#: what names a server in a message: a URL, or a host (name or address) with a port
_WHERE = re.compile(r"""[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'"<>)\]]*[^\s'"<>)\].,:;]"""
                    r"|\[[0-9a-fA-F:.]+\](?::\d+)?"
                    r"|\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"
                    r"|\b[a-zA-Z0-9.-]+:\d{2,5}\b")


def redact(message: str) -> str:
    """``message`` without the addresses it names: API clients are not told
    where the owner's model server is (the owner's log has the full text)."""
    return _WHERE.sub("<model server>", message)


class ApiError(Exception):
    """A refusal with its HTTP status, OpenAI error ``type`` and ``code``."""

    def __init__(self, status: int, message: str, *, type_: str = "invalid_request_error",
                 code: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.code = code
        self.headers = headers or {}

    def envelope(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "code": self.code}}

    def body(self) -> bytes:
        return orjson.dumps(self.envelope())


def from_exception(exc: BaseException, retry_after: int) -> ApiError:
    """The HTTP form of an owner error raised while serving a request."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, StorageError):
        return ApiError(503, f"storage unavailable: {redact(exc.detail)}", type_="server_error",
                        code="storage_unavailable",
                        headers={"Retry-After": str(retry_after)})
    if not isinstance(exc, RpcError):
        raise exc
    message = exc.detail
    if isinstance(exc, InvalidParams):
        return ApiError(400, message, code="invalid_params")
    if isinstance(exc, NotFound):
        return ApiError(404, message, code="not_found")
    # a 409 is the same whenever it is asked again: the SDKs are told not to retry
    if isinstance(exc, AdmissionConflict):
        return ApiError(409, message, code="idempotency_conflict",
                        headers={"x-should-retry": "false"})
    if isinstance(exc, UnknownExecution):
        return ApiError(409, message, code="session_paused", headers={"x-should-retry": "false"})
    if isinstance(exc, Overloaded):
        return ApiError(429, message, type_="rate_limit_error", code="overloaded",
                        headers={"Retry-After": str(retry_after)})
    if isinstance(exc, RuntimeDraining | StorageUnavailable):
        return ApiError(503, message, type_="server_error", code=exc.reason,
                        headers={"Retry-After": str(retry_after)})
    return ApiError(500, message, type_="server_error", code=exc.reason)
