"""The sans-I/O JSON-RPC 2.0 dispatcher: one frame in, the reply frame (or nothing) out.

``Dispatcher.handle(frame, ctx)`` parses a frame, validates the envelope and the
params against the method table, awaits the registered handler and encodes what
goes back. It never touches a socket; the transport passes each text frame in and
sends whatever bytes come out. ``ctx`` is opaque here: the transport's
per-connection state, handed to every handler untouched.

Quotes are from the JSON-RPC 2.0 specification (https://www.jsonrpc.org/specification).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from .errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    RpcError,
)
from .framing import encode_error, encode_result
from .methods import METHODS, Method
from .models import Model
from .refusals import MAX_BATCH, refusal, unparsable

__all__ = ["MAX_BATCH", "MAX_FIELD_ERRORS", "Dispatcher", "Guard", "Handler", "Refine"]

log = logging.getLogger("tether.rpc")

MAX_FIELD_ERRORS = 20  # validation problems listed in invalid_params data.fields

Handler = Callable[[Any, Any], Awaitable[Any]]
#: asked before a request of a known method runs: an error to refuse it with, or None
Guard = Callable[[str, Any], RpcError | None]
#: asked for a better refusal when a request's params fail validation (see register)
Refine = Callable[[dict[str, Any]], RpcError | None]
H = TypeVar("H", bound=Handler)

# "A Request object" has exactly these members; anything else is most likely a
# typo ("param") that would otherwise surface as a confusing missing-field error.
_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_NO_PARAMS: dict[str, Any] = {}  # "params" omitted means {}; shared, never mutated
_METHOD_ECHO_CHARS = 100  # names from the peer are echoed back, but not without bound


class _Route(NamedTuple):
    handler: Handler
    params: type[Model]
    shared: Model | None  # one instance reused when the params model has no fields
    refine: Refine | None


class Dispatcher:
    """Routes JSON-RPC requests to handlers registered per method of ``methods``.

    Handlers are ``async def handler(params, ctx)`` receiving the validated params
    model and returning the result model (or plain JSON data). They report
    failures by raising ``RpcError`` subclasses; any other exception becomes
    ``internal_error`` with an ``error_id`` and its traceback is logged, never sent.

    ``guard(method, ctx)``, when given, is asked before the params of a request
    are even validated; an error it returns is the reply, and nothing runs.

    ``translate`` maps a foreign exception a handler let through (the store's,
    say) to the ``RpcError`` it means on the wire; None leaves it a bug.

    With ``check_results=True`` every result is also validated against the
    method's result model (an invalid one becomes ``internal_error``); meant for
    tests, since it costs a validation per call.
    """

    def __init__(
        self,
        methods: Mapping[str, Method] = METHODS,
        *,
        max_batch: int = MAX_BATCH,
        check_results: bool = False,
        translate: Callable[[Exception], RpcError | None] | None = None,
        guard: Guard | None = None,
    ) -> None:
        self._methods = dict(methods)
        self._guard = guard
        self._translate = translate
        self._routes: dict[str, _Route] = {}
        self._max_batch = max_batch
        self._check_results = check_results

    @property
    def methods(self) -> Mapping[str, Method]:
        return self._methods

    def register(self, name: str, *, refine: Refine | None = None) -> Callable[[H], H]:
        """Decorator registering the handler of method ``name``.

        ``refine(params)``, when given, is asked whenever the raw params fail
        validation; an error it returns is sent instead of the validation's own.
        The owner uses it so that a text beyond the protocol's ceiling is refused
        in the words of its own, lower, configured limit.

        Raises ``ValueError`` for a name outside the method table or one that
        already has a handler.
        """
        method = self._methods.get(name)
        if method is None:
            raise ValueError(f"cannot register {name!r}: not in the method table")
        if name in self._routes:
            raise ValueError(f"cannot register {name!r}: it already has a handler")

        def decorator(handler: H) -> H:
            # Checked again here: two register(name) calls may both be pending.
            if name in self._routes:
                raise ValueError(f"cannot register {name!r}: it already has a handler")
            wrapped: Handler = handler
            if self._check_results:
                wrapped = _checking(handler, method)
            shared = method.params() if not method.params.model_fields else None
            self._routes[name] = _Route(wrapped, method.params, shared, refine)
            return handler

        return decorator

    def unhandled(self) -> list[str]:
        """Methods of the table that have no handler yet (they answer method_not_found)."""
        return [name for name in self._methods if name not in self._routes]

    async def handle(self, frame: bytes | str, ctx: Any) -> bytes | None:
        """The encoded reply to ``frame``, or None when nothing is to be sent.

        Nothing is sent for a notification (even one that fails) and for a batch
        made only of notifications. Cancellation of the caller propagates: the
        transport decides what a cancelled request means for its peer.
        """
        try:
            msg = orjson.loads(frame)
        except orjson.JSONDecodeError as exc:
            if "surrogate" in str(exc):
                return unparsable(frame, ParseError(
                    "frame holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff "
                    "escape): text must be valid Unicode, so encode strings whole and never "
                    "cut one within a surrogate pair", problem="lone_surrogate"))
            return encode_error(None, ParseError(f"frame is not valid JSON: {exc}"))
        # JSON text can carry NUL only escaped: without "\u0000" in the frame no
        # string of it holds one, and the params need no walk
        nul = ("\\u0000" in frame) if type(frame) is str else (b"\\u0000" in frame)
        if type(msg) is dict:
            try:
                return await self._call(msg, ctx, nul)
            except Exception:
                return self._failed(msg)
        if type(msg) is list:
            return await self._batch(msg, ctx, nul)
        return encode_error(
            None, InvalidRequest("a frame must hold a request object or a batch array")
        )

    async def _batch(self, msgs: list[Any], ctx: Any, nul: bool) -> bytes | None:
        if not msgs:
            # "If the batch rpc call itself fails to be recognized as an valid JSON
            # or as an Array with at least one value, the response from the Server
            # MUST be a single Response object."
            return encode_error(None, InvalidRequest("empty batch"))
        if len(msgs) > self._max_batch:
            return encode_error(
                None,
                InvalidRequest(
                    f"batch of {len(msgs)} requests exceeds the limit of {self._max_batch}",
                    limit=self._max_batch,
                ),
            )
        # Members run concurrently, so a client that needs ordering must not batch.
        replies = await asyncio.gather(*(self._member(m, ctx, nul) for m in msgs))
        parts = [r for r in replies if r is not None]
        if not parts:
            # "If there are no Response objects contained within the Response array
            # as it is to be sent to the client, the server MUST NOT return an empty
            # Array and should return nothing at all."
            return None
        return b"[" + b",".join(parts) + b"]"

    async def _member(self, msg: Any, ctx: Any, nul: bool) -> bytes | None:
        if type(msg) is dict:
            try:
                return await self._call(msg, ctx, nul)
            except Exception:
                return self._failed(msg)
        return encode_error(None, InvalidRequest("a batch member must be a request object"))

    @staticmethod
    def _failed(msg: dict[str, Any]) -> bytes | None:
        """The reply to a request whose envelope, guard or params' checks failed outside
        the handler (call it inside the ``except``): ``internal_error``, never silence."""
        if "id" not in msg:
            return None
        rid = msg.get("id")
        return encode_error(rid if type(rid) is str or type(rid) is int else None,
                            _logged_internal(str(msg.get("method"))[:_METHOD_ECHO_CHARS]))

    async def _call(self, msg: dict[str, Any], ctx: Any, nul: bool) -> bytes | None:
        # Envelope. Invalid requests are answered even without an id: the spec's
        # own examples reply to them with id null.
        rid = msg.get("id")
        rid_type = type(rid)
        # bool is an int subclass in Python but not a JSON-RPC id; the exact type
        # test rules it (and floats, objects, arrays) out.
        if rid_type is not str and rid_type is not int and rid is not None:
            return encode_error(None, InvalidRequest("id must be a string, an integer or null"))
        if msg.get("jsonrpc") != "2.0":
            return encode_error(rid, InvalidRequest('jsonrpc must be exactly "2.0"'))
        name = msg.get("method")
        if type(name) is not str:
            return encode_error(rid, InvalidRequest("method must be a string"))
        if not _REQUEST_KEYS.issuperset(msg):
            # Echo a few, shortened: the member names are the peer's, unbounded.
            extra = [k[:_METHOD_ECHO_CHARS] for k in msg if k not in _REQUEST_KEYS][:5]
            return encode_error(rid, InvalidRequest(f"unknown request members: {extra}"))
        params = msg.get("params", _NO_PARAMS)
        if type(params) is not dict and type(params) is not list:
            return encode_error(rid, InvalidRequest("params must be an object when present"))
        # "A Notification is a Request object without an "id" member ... The Server
        # MUST NOT reply to a Notification", not even with an error.
        notification = "id" not in msg

        route = self._routes.get(name)
        if route is None:
            if notification:
                return None
            return encode_error(rid, self._not_found(name))
        if self._guard is not None:
            refused = self._guard(name, ctx)
            if refused is not None:
                return None if notification else encode_error(rid, refused)

        if type(params) is list:
            if notification:
                return None
            return encode_error(
                rid, InvalidParams(
                    "params must be an object; positional params are not supported",
                    fields=[{"loc": "", "msg": "params must be an object",
                             "type": "dict_type"}])
            )
        if nul and (where := _nul_at(params)) is not None:
            # stored text cannot hold NUL on every store (PostgreSQL refuses it): refused
            # here, for every method, before anything is recorded
            if notification:
                return None
            return encode_error(rid, InvalidParams(
                "strings may not contain NUL (U+0000)",
                fields=[{"loc": where, "msg": "contains NUL (U+0000)", "type": "string_nul"}]))
        try:
            if route.shared is not None and not params:
                validated = route.shared
            else:
                validated = route.params.model_validate(params)
        except ValidationError as exc:
            if notification:
                return None
            # params is an object here: a list was answered above
            refined = route.refine(params) if route.refine is not None \
                and type(params) is dict else None
            return encode_error(rid, refined or _invalid_params(exc))

        try:
            result = await route.handler(validated, ctx)
            if notification:
                return None
            return encode_result(rid, result)
        except RpcError as err:
            if notification:
                return None
            return encode_error(rid, err)
        except Exception as exc:
            mapped = self._translate(exc) if self._translate is not None else None
            if mapped is not None:
                return None if notification else encode_error(rid, mapped)
            error = _logged_internal(name)
            return None if notification else encode_error(rid, error)

    def refuse_binary(self, frame: bytes) -> bytes | None:
        """The reply to a binary frame: the protocol is text frames only (docs/protocol.md).

        It is refused, never run, with ``invalid_request`` under the request's id
        when the bytes hold a readable one, so the caller's promise settles.
        """
        return refusal(frame, InvalidRequest(
            "binary frames are not accepted: send each message as a text frame of UTF-8 JSON"))

    def _not_found(self, name: str) -> MethodNotFound:
        shown = name[:_METHOD_ECHO_CHARS]
        if name in self._methods:
            return MethodNotFound(f"method {shown!r} is not served by this owner", method=shown)
        return MethodNotFound(f"no method named {shown!r}", method=shown)


def _logged_internal(method: str) -> InternalError:
    """An internal error with an id of its own, the traceback logged under that id
    (call it inside the ``except``); the wire gets only the id."""
    error_id = secrets.token_hex(4)
    log.exception("internal error %s in method %s", error_id, method)
    return InternalError(f"internal error {error_id}; the owner's log has the details",
                         error_id=error_id)


def _nul_at(value: Any) -> str | None:
    """The dotted path of the first string (or key) in ``value`` holding NUL, or None.

    Walked with a stack of its own, not by recursion: params may nest as deep as the
    JSON parser allows (1024), deeper than Python's recursion limit leaves room for
    under the owner's own frames."""
    stack: list[tuple[str, Any, bool]] = [("", value, False)]  # path, item, key has NUL
    while stack:
        where, item, bad_key = stack.pop()
        kind = type(item)
        if bad_key or (kind is str and "\x00" in item):
            return where
        if kind is dict:
            stack.extend(reversed([(f"{where}.{key}" if where else str(key), child,
                                    "\x00" in key) for key, child in item.items()]))
        elif kind is list:
            stack.extend(reversed([(f"{where}.{i}" if where else str(i), child, False)
                                   for i, child in enumerate(item)]))
    return None


def _invalid_params(exc: ValidationError) -> InvalidParams:
    # Neither the offending input nor pydantic's docs URL goes on the wire: the
    # input may be megabytes of prompt text, and loc/msg/type say enough.
    problems = exc.errors(include_url=False, include_context=False, include_input=False)
    # A loc part may be a key the peer made up (extra_forbidden): shortened like
    # method names, or a 4 MiB key would come back twice in the reply.
    fields = [
        {
            "loc": ".".join(str(part)[:_METHOD_ECHO_CHARS] for part in p["loc"]),
            "msg": p["msg"],
            "type": p["type"],
        }
        for p in problems[:MAX_FIELD_ERRORS]
    ]
    detail = "; ".join(f"{f['loc']}: {f['msg']}" if f["loc"] else f["msg"] for f in fields)
    if len(problems) > MAX_FIELD_ERRORS:
        detail += f"; and {len(problems) - MAX_FIELD_ERRORS} more"
    return InvalidParams(detail, fields=fields)


def _checking(handler: Handler, method: Method) -> Handler:
    """``handler``, with its result validated against ``method.result`` (tests only)."""

    async def checked(params: Any, ctx: Any) -> Any:
        result = await handler(params, ctx)
        if isinstance(result, BaseModel):
            if not isinstance(result, method.result):
                raise TypeError(
                    f"{method.name} returned {type(result).__name__}, "
                    f"expected {method.result.__name__}"
                )
            method.result.model_validate(result.model_dump(mode="json"))
        else:
            method.result.model_validate(result)
        return result

    return checked
