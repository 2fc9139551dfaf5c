"""The viewer page on the TCP listener: static files and two small JSON endpoints.

The TCP listener answers plain HTTP GETs for ``/web/...`` through websockets'
``process_request`` hook (``Listeners.http_hook``); everything else is the
WebSocket endpoint ``/``. Kept to one function and a file table so it can move
into an HTTP app on the same port unchanged.

- ``/`` without an Upgrade header, ``/web``: redirect to ``/web/``.
- ``/web/``, ``/web/<file>``: the page (daemon/web/), no CDN, no build step.
- ``/web/exchange`` with ``Authorization: Bearer <one-time token>``: the token of
  ``tether web``'s link, traded once for a bearer token the page keeps.
- ``/web/status`` with ``Authorization: Bearer <token>``: 200 if the token would be
  let in, 401 if not. The page asks it before connecting and after a close, so it
  can tell "refused" (an HTTP answer) from "owner stopped" (no answer at all).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from importlib import resources
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from .tokens import TokenService

__all__ = ["ASSET_TYPES", "web_hook"]

ASSET_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
               ".css": "text/css; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml"}
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_SECURITY = [
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy",
     "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'"),
]


def _assets() -> dict[str, bytes]:
    root = resources.files("tether.daemon") / "web"
    out = {}
    for item in root.iterdir():
        if item.is_file() and _NAME.match(item.name) and any(
                item.name.endswith(ext) for ext in ASSET_TYPES):
            out[item.name] = item.read_bytes()
    return out


def _response(status: HTTPStatus, body: bytes, ctype: str,
              extra: list[tuple[str, str]] | None = None) -> Response:
    headers = Headers([("Content-Type", ctype), ("Content-Length", str(len(body))),
                       ("Connection", "close"), *_SECURITY, *(extra or [])])
    return Response(status.value, status.phrase, headers, body)


def _json(status: HTTPStatus, data: dict[str, Any]) -> Response:
    return _response(status, json.dumps(data).encode(), "application/json")


def _bearer(request: Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    return auth[7:].strip() or None if auth.lower().startswith("bearer ") else None


def web_hook(tokens: TokenService
             ) -> Callable[[ServerConnection, Request], Awaitable[Response | None]]:
    """The listener's ``http_hook``: a Response for the page's paths, None otherwise."""
    assets = _assets()

    async def hook(conn: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        upgrade = "websocket" in request.headers.get("Upgrade", "").lower()
        if path == "/" and not upgrade or path == "/web":
            return _response(HTTPStatus.FOUND, b"", "text/plain", [("Location", "/web/")])
        if not path.startswith("/web/"):
            return None
        name = path[len("/web/"):] or "index.html"
        if name == "status":
            token = _bearer(request)
            if token is not None and await tokens.check(token) is not None:
                return _json(HTTPStatus.OK, {"ok": True})
            return _json(HTTPStatus.UNAUTHORIZED, {
                "ok": False, "reason": "unauthorized",
                "detail": "this token is not valid (revoked, expired or mistyped): "
                          "run `tether web` for a new link"})
        if name == "exchange":
            once = _bearer(request)
            minted = await tokens.exchange(once) if once else None
            if minted is None:
                return _json(HTTPStatus.UNAUTHORIZED, {
                    "ok": False, "reason": "unauthorized",
                    "detail": "this link was used already or has expired: "
                              "run `tether web` for a new one"})
            return _json(HTTPStatus.OK, {"ok": True, **minted})
        body = assets.get(name)
        if body is None:
            return _response(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")
        ext = name[name.rfind("."):]
        return _response(HTTPStatus.OK, body, ASSET_TYPES[ext])

    return hook
