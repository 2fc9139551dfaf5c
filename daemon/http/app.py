"""The HTTP endpoint's ASGI app: routes, bearer tokens, limits, errors.

Routes (docs/http.md): ``GET /health`` (no token), ``GET /v1/models[/{id}]``,
``POST /v1/chat/completions``, ``POST /v1/responses``, ``GET
/v1/responses/{id}`` and its ``/cancel`` (a bearer token of ``tether token``,
checked against its stored hash), and the CORS preflight of any of them.
Every refusal is OpenAI's error envelope (errors.py). Turns in flight
(chat completions, responses) are bounded by
``http.max_concurrent_requests``: a request's body is read first, within
``http.body_timeout_seconds`` (a slow body holds no slot), and past the bound
it is refused with 429 and ``Retry-After`` before anything is admitted. A
request in flight ends when its token is revoked or expires (``drop_token``).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from tether.rpc.protocol import MAX_ID_CHARS

from ..config.core import HttpConfig
from . import cors, responses
from .chat import (
    Receive,
    Render,
    Send,
    StreamError,
    answer,
    chat_render,
    chat_stream_error,
    rerunnable,
)
from .errors import ApiError, from_exception
from .request import ChatRequest, parse_chat_request
from .retries import Attempts, retry_count
from .turn import ApiTurns, Opened

__all__ = ["ApiApp"]

log = logging.getLogger("tether.http")

#: another app's pages on this port (the viewer, daemon/transport/viewer.py): (status,
#: headers, body) for a path it serves, None for any other
Pages = Callable[[str, dict[str, str]], Awaitable[tuple[int, list[tuple[str, str]], bytes] | None]]

#: what an Idempotency-Key or a session id may be: printable, no spaces
_ID = re.compile(r"[\x21-\x7e]+")


@dataclass(frozen=True)
class ApiLimits:
    config: HttpConfig
    models: tuple[str, ...]
    max_text_chars: int
    allowed_origins: tuple[str, ...]
    #: tether's own tools: a client's tool may not take one of their names
    tool_names: frozenset[str] = frozenset()


class ApiApp:
    """An ASGI 3 application (served by uvicorn on the owner's TCP port)."""

    def __init__(self, turns: ApiTurns, token_id: Callable[[str], Awaitable[str | None]],
                 limits: ApiLimits, draining: Callable[[], bool],
                 pages: Pages | None = None) -> None:
        self._turns = turns
        self._pages = pages
        self._token_id = token_id
        self._limits = limits
        self._draining = draining
        self._in_flight = 0
        self.attempts = Attempts(limits.config.retry_window_seconds,
                                 limits.config.retry_claim_seconds, turns.cancel_quietly)
        #: the requests in flight by token id: each one's stop, set when the token goes
        self._stops: dict[str, set[asyncio.Future[ApiError]]] = {}

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is off and WebSocket upgrades never get here
        started = False
        origin = _lower_headers(scope).get("origin")
        extra = cors.response_headers(origin) if origin in self._limits.allowed_origins \
            and origin is not None else []

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if extra:  # unless the answer has its own (a preflight's)
                    given = list(message.get("headers", []))
                    names = {k for k, _ in given}
                    message = {**message, "headers": given + [
                        (k, v) for k, v in extra if k not in names]}
            await send(message)

        try:
            await self._route(scope, receive, tracked)
        except ApiError as exc:
            await _respond(tracked, exc.status, exc.body(), exc.headers)
        except Exception:
            # a defect here is still an answer in OpenAI's shape, never a bare 500
            log.exception("HTTP %s %s failed", scope["method"], scope["path"])
            if started:
                raise
            error = ApiError(500, "the owner failed to answer this request; its log has the "
                             "details", type_="server_error", code="internal_error")
            await _respond(tracked, error.status, error.body())

    def drop_token(self, token_id: str, why: str = "revoked") -> int:
        """End every request in flight with ``token_id`` (revoked or expired): its
        stream gets an error event, its turn is cancelled; how many there were."""
        stops = self._stops.pop(token_id, set())
        error = ApiError(401, f"the token was {why}", type_="authentication_error",
                         code=f"token_{why}")
        for stop in stops:
            if not stop.done():
                stop.set_result(error)
        return len(stops)

    async def _route(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        path, method = scope["path"], scope["method"]
        routes: dict[str, tuple[str, Callable[..., Awaitable[None]]]] = {
            "/health": ("GET", self._health),
            "/v1/models": ("GET", self._models),
            "/v1/chat/completions": ("POST", self._chat),
            "/v1/responses": ("POST", self._responses),
        }
        if self._pages is not None and method in ("GET", "HEAD") and \
                (page := await self._pages(path, _lower_headers(scope))) is not None:
            status, page_headers, body = page
            await send({"type": "http.response.start", "status": status, "headers": [
                (k.lower().encode(), v.encode()) for k, v in page_headers]})
            await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
            return
        if path == "/":
            raise ApiError(426, "this is tether's WebSocket endpoint (see docs/protocol.md); "
                           "the HTTP API is under /v1", code="upgrade_required",
                           headers={"Upgrade": "websocket"})
        if path.startswith("/v1/models/") and path != "/v1/models/":
            routes[path] = ("GET", self._model)
        elif path.startswith("/v1/responses/") and path.count("/") in (3, 4):
            routes[path] = ("POST" if path.endswith("/cancel") else "GET", self._response)
        if path not in routes:
            raise ApiError(404, f"no route {path} (try /v1/chat/completions, /v1/responses, "
                           "/v1/models, /health)", code="not_found")
        allowed, handler = routes[path]
        headers = _lower_headers(scope)
        origin = headers.get("origin")
        if origin is not None and origin not in self._limits.allowed_origins:
            raise ApiError(403, f"origin {origin} is not allowed (daemon.tcp_allowed_origins)",
                           type_="permission_error", code="forbidden_origin")
        if method == "OPTIONS":  # a browser's preflight: no token is sent with it
            answer = cors.preflight(
                origin, headers.get("access-control-request-headers"),
                headers.get("access-control-request-private-network") == "true") \
                if origin is not None else {"Allow": f"{allowed}, OPTIONS"}
            await send({"type": "http.response.start", "status": 204, "headers": [
                (k.lower().encode(), v.encode()) for k, v in answer.items()]})
            await send({"type": "http.response.body", "body": b""})
            return
        if method != allowed and not (allowed == "GET" and method == "HEAD"):
            raise ApiError(405, f"{path} takes {allowed}", code="method_not_allowed",
                           headers={"Allow": allowed})
        if handler == self._health:
            await handler(send)
            return
        token_id = await self._authorize(headers)
        if handler == self._model:
            await self._model(send, receive, headers, token_id, path)
            return
        if handler == self._response:
            await self._response(send, receive, headers, token_id, path, method)
            return
        await handler(send, receive, headers, token_id)

    async def _authorize(self, headers: dict[str, str]) -> str:
        auth = headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        found = None
        if scheme.lower() == "bearer" and token.strip():
            found = await self._token_id(token.strip())
        if found is None:
            raise ApiError(401, "a valid bearer token is required (mint one with "
                           "`tether token`)", type_="authentication_error",
                           code="invalid_api_key",
                           headers={"WWW-Authenticate": 'Bearer realm="tether"'})
        return found

    async def _health(self, send: Send) -> None:
        draining = self._draining()
        await _respond(send, 503 if draining else 200, orjson.dumps(
            {"status": "draining" if draining else "ok"}))

    async def _models(self, send: Send, receive: Receive, headers: dict[str, str],
                      token_id: str) -> None:
        data = [_model_object(m) for m in self._limits.models]
        await _respond(send, 200, orjson.dumps({"object": "list", "data": data}))

    async def _model(self, send: Send, receive: Receive, headers: dict[str, str],
                     token_id: str, path: str) -> None:
        name = path.removeprefix("/v1/models/")
        if name not in self._limits.models:
            raise ApiError(404, f"the model {name!r} does not exist; GET /v1/models lists "
                           "the names this endpoint serves", code="model_not_found")
        await _respond(send, 200, orjson.dumps(_model_object(name)))

    async def _chat(self, send: Send, receive: Receive, headers: dict[str, str],
                    token_id: str) -> None:
        limits = self._limits
        await self._turn(send, receive, headers, token_id, lambda body: parse_chat_request(
            body, limits.models, limits.max_text_chars, limits.tool_names))

    async def _responses(self, send: Send, receive: Receive, headers: dict[str, str],
                         token_id: str) -> None:
        limits = self._limits
        await self._turn(send, receive, headers, token_id, lambda body: responses.
                         parse_responses_request(body, limits.models, limits.max_text_chars),
                         responses.render, responses.stream_error)

    async def _response(self, send: Send, receive: Receive, headers: dict[str, str],
                        token_id: str, path: str, method: str) -> None:
        """GET /v1/responses/{id}, POST /v1/responses/{id}/cancel."""
        resp_id = path.removeprefix("/v1/responses/").removesuffix("/cancel")
        try:
            row = await self._turns.response_row(token_id, resp_id)
            if path.endswith("/cancel"):
                await self._turns.cancel_admission(row)
                row = await self._turns.response_row(token_id, resp_id)
        except Exception as exc:
            raise from_exception(exc, self._limits.config.retry_after_seconds) from None
        body = orjson.dumps(responses.object_of_row(row))
        await _respond(send, 200, body)

    async def _turn(self, send: Send, receive: Receive, headers: dict[str, str],
                    token_id: str, parse: Callable[[bytes], ChatRequest],
                    render: Render = chat_render,
                    stream_error: StreamError = chat_stream_error) -> None:
        """One request that is a turn: read, check, admit (or attach a retry), answer."""
        cfg = self._limits.config
        key = _header_id(headers, "idempotency-key")
        session_id = _header_id(headers, "x-tether-session-id")
        conversation = _header_id(headers, "x-tether-conversation") or \
            _header_id(headers, "x-openwebui-chat-id")
        if session_id is not None and conversation is not None:
            raise ApiError(400, "give X-Tether-Session-Id or a conversation key "
                           "(X-Tether-Conversation), not both", code="invalid_header")
        try:
            async with asyncio.timeout(cfg.body_timeout_seconds):
                body = await _read_body(receive, headers, cfg.max_body_bytes)
        except TimeoutError:
            raise ApiError(408, f"the body did not arrive within {cfg.body_timeout_seconds:g} "
                           "s (http.body_timeout_seconds)", code="request_timeout") from None
        req = parse(body)
        if req.previous_response_id is not None:
            if session_id is not None or conversation is not None:
                raise ApiError(400, "give previous_response_id or a session header, not both",
                               code="invalid_header")
            try:
                session_id = await self._turns.session_of_response(token_id,
                                                                   req.previous_response_id)
            except Exception as exc:
                raise from_exception(exc, cfg.retry_after_seconds) from None
        if self._in_flight >= cfg.max_concurrent_requests:
            raise ApiError(429, f"{cfg.max_concurrent_requests} requests are already "
                           "running; retry later", type_="rate_limit_error",
                           code="too_many_requests",
                           headers={"Retry-After": str(cfg.retry_after_seconds)})
        self._in_flight += 1
        stop: asyncio.Future[ApiError] = asyncio.get_running_loop().create_future()
        self._stops.setdefault(token_id, set()).add(stop)
        # an SDK's retry of an unkeyed request is known by its token and body
        retries = retry_count(headers) if key is None else None
        ident = (token_id, req.digest, session_id or "", conversation or "")
        try:
            opened = self.attempts.claim(ident) if retries else None
            if opened is None:
                try:
                    opened = await self._turns.open(token_id, key, req, session_id,
                                                    conversation)
                except Exception as exc:
                    raise from_exception(exc, cfg.retry_after_seconds) from None
                if retries is not None:
                    self.attempts.record(ident, opened)
            how = await answer(send, receive, self._turns, opened, req, stop, render,
                               stream_error)
            if retries is not None:
                # a background response runs on whoever is there to fetch it
                await self._settle_attempt(
                    ident, opened, "delivered" if req.background and how == "gone" else how)
            # not delivered: nobody can fetch this answer any more unless it has a
            # key or a retry may still claim it (and a revoked token can fetch
            # nothing), so stop spending on it
            if how == "stopped" or (how == "gone" and key is None and retries is None
                                    and not req.background):
                await self._turns.cancel_quietly(opened)
        finally:
            self._in_flight -= 1
            live = self._stops.get(token_id)
            if live is not None:
                live.discard(stop)
                if not live:
                    del self._stops[token_id]

    async def _settle_attempt(self, ident: tuple[str, ...], opened: Opened,
                              how: str) -> None:
        """An SDK client's attempt ended: its turn waits for a retry to claim it,
        or a retry may run it anew if it failed before doing anything."""
        if how == "delivered":
            receipt = await self._turns.receipt(opened)
            if rerunnable(receipt) and not await self._turns.side_effects(opened):
                self.attempts.forget(ident)
                return
        self.attempts.release(ident, how == "delivered")


def _model_object(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "tether"}


def _header_id(headers: dict[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        return None
    if not _ID.fullmatch(value) or len(value) > MAX_ID_CHARS:
        raise ApiError(400, f"{name} must be 1-{MAX_ID_CHARS} printable characters without "
                       "spaces", code="invalid_header")
    return value


async def _read_body(receive: Receive, headers: dict[str, str], limit: int) -> bytes:
    too_big = ApiError(413, f"the body is larger than {limit} bytes (http.max_body_bytes)",
                       code="request_too_large")
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_big
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ApiError(400, "the client went away", code="disconnected")
        part = message.get("body", b"")
        size += len(part)
        if size > limit:
            raise too_big
        chunks.append(part)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _lower_headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


async def _respond(send: Send, status: int, body: bytes,
                   headers: dict[str, str] | None = None) -> None:
    raw = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
