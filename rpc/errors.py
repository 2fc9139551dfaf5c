"""The error classes of the tether wire protocol and their JSON-RPC error objects.

Every error a client can see is one class here, carrying its JSON-RPC ``code``
and the stable snake_case ``reason`` that clients switch on (SPEC §2)::

    RpcError                       (base; also stands in for reasons we do not know)
    ├── ParseError                 -32700  parse_error          frame is not JSON
    ├── InvalidRequest             -32600  invalid_request      not a JSON-RPC request
    ├── MethodNotFound             -32601  method_not_found     unknown method
    ├── InvalidParams              -32602  invalid_params       params fail validation
    ├── InternalError              -32603  internal_error       a bug; data.error_id points at the log
    ├── NotFound                   -32004  not_found            unknown session / admission
    ├── AdmissionConflict          -32009  admission_conflict   same input_id, different payload
    ├── RuntimeDraining            -32010  runtime_draining     owner is shutting down
    ├── UnknownExecution           -32011  unknown_execution    session paused on an unknown admission
    ├── Overloaded                 -32012  overloaded           a bound was hit
    ├── StorageUnavailable         -32013  storage_unavailable  SQLite failed
    └── Forbidden                  -32003  forbidden            not for this caller (an agent's own process)

On the wire an error is ``{"code", "message": reason, "data": {"reason", "detail",
**extras}}``; ``RpcError.to_wire()`` builds it and ``RpcError.from_wire()`` turns
it back into the matching class, so a client catches ``NotFound`` exactly as the
daemon raised it. Nothing here imports beyond the stdlib: clients use this module
as the owner does.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "ERRORS",
    "AdmissionConflict",
    "Forbidden",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "MethodNotFound",
    "NotFound",
    "Overloaded",
    "ParseError",
    "RpcError",
    "RuntimeDraining",
    "StorageUnavailable",
    "UnknownExecution",
]

# reason -> class; filled by RpcError.__init_subclass__ in declaration order, which
# is the order of the SPEC §2 table (the schema and the docs list errors this way).
ERRORS: dict[str, type[RpcError]] = {}

# data keys the envelope owns; extras may not shadow them, or a client switching
# on data.reason could be told something different from message.
_RESERVED = frozenset({"reason", "detail"})


class RpcError(Exception):
    """An error that is sent to the peer as a JSON-RPC error object.

    ``detail`` is human text for logs and terminals; clients must switch on
    ``reason`` (or the class), never on ``detail``. Keyword arguments become extra
    keys of ``data`` and must be JSON-serialisable.
    """

    # -32000 is the first of JSON-RPC's implementation-defined server error codes;
    # the base class only appears on the wire for reasons a client does not know.
    code: ClassVar[int] = -32000
    reason: ClassVar[str] = "rpc_error"

    def __init__(self, detail: str = "", **data: Any) -> None:
        clash = _RESERVED.intersection(data)
        if clash:
            raise TypeError(f"extra data may not use reserved keys: {sorted(clash)}")
        super().__init__(detail)
        self.detail = detail
        self.data = data

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Only direct, explicitly tagged classes claim a reason; a daemon-local
        # subclass of NotFound (say) still travels as not_found.
        if "reason" in cls.__dict__:
            if cls.reason in ERRORS:
                raise TypeError(f"duplicate error reason {cls.reason!r}")
            ERRORS[cls.reason] = cls

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}" if self.detail else self.reason

    def __repr__(self) -> str:
        args = [repr(self.detail)] + [f"{k}={v!r}" for k, v in self.data.items()]
        return f"{type(self).__name__}({', '.join(args)})"

    def __reduce__(self) -> Any:
        # Exception's default pickling only replays args, which would drop the
        # extras and, for from_wire's foreign reasons, the code and reason.
        return (_rebuild, (type(self), self.code, self.reason, self.detail, self.data))

    def to_wire(self) -> dict[str, Any]:
        """The JSON-RPC error object for this error."""
        return {
            "code": self.code,
            "message": self.reason,
            "data": {"reason": self.reason, "detail": self.detail, **self.data},
        }

    @classmethod
    def from_wire(cls, obj: Any) -> RpcError:
        """Rebuild the error a peer sent.

        Known reasons give their own class; an unknown reason (a newer owner, a
        foreign JSON-RPC server) gives a plain ``RpcError`` that keeps the peer's
        code and reason. Malformed objects are tolerated: nothing here raises.
        """
        if not isinstance(obj, dict):
            obj = {}
        data = obj.get("data")
        data = dict(data) if isinstance(data, dict) else {}
        message = obj.get("message")
        reason = data.pop("reason", None)
        if not isinstance(reason, str):
            reason = message if isinstance(message, str) else RpcError.reason
        detail = data.pop("detail", "")
        if not isinstance(detail, str):
            detail = str(detail)
        code = obj.get("code")
        known = ERRORS.get(reason)
        if known is not None:
            return known(detail, **data)
        err = RpcError(detail, **data)
        if isinstance(code, int) and not isinstance(code, bool):
            err.code = code  # type: ignore[misc]  # instance override of the ClassVar
        err.reason = reason  # type: ignore[misc]
        return err


def _rebuild(cls: type[RpcError], code: int, reason: str, detail: str, data: dict) -> RpcError:
    err = cls(detail, **data)
    if (code, reason) != (cls.code, cls.reason):
        err.code = code  # type: ignore[misc]
        err.reason = reason  # type: ignore[misc]
    return err


class ParseError(RpcError):
    code = -32700
    reason = "parse_error"


class InvalidRequest(RpcError):
    code = -32600
    reason = "invalid_request"


class MethodNotFound(RpcError):
    code = -32601
    reason = "method_not_found"


class InvalidParams(RpcError):
    """Params failed validation; ``data.fields`` lists ``{loc, msg, type}`` per problem."""

    code = -32602
    reason = "invalid_params"


class InternalError(RpcError):
    """A bug in the owner; ``data.error_id`` matches the log line holding the traceback."""

    code = -32603
    reason = "internal_error"


class NotFound(RpcError):
    code = -32004
    reason = "not_found"


class AdmissionConflict(RpcError):
    """Same identity, different payload; ``data.admission_id`` names the existing one."""

    code = -32009
    reason = "admission_conflict"


class RuntimeDraining(RpcError):
    code = -32010
    reason = "runtime_draining"


class UnknownExecution(RpcError):
    code = -32011
    reason = "unknown_execution"


class Overloaded(RpcError):
    code = -32012
    reason = "overloaded"


class StorageUnavailable(RpcError):
    code = -32013
    reason = "storage_unavailable"


class Forbidden(RpcError):
    """The caller may not use this method: its process descends from one of the
    owner's tool processes (an agent may not answer its own approval prompts)."""

    code = -32003
    reason = "forbidden"
