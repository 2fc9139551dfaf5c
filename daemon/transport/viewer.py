"""The viewer page on the TCP listener: static files and two small JSON endpoints.

The TCP listener hands every request that is not a WebSocket upgrade to the
HTTP app (daemon/http/), which asks ``ViewerPages.answer`` first: the page's
paths are answered here, everything else is the OpenAI-compatible API.

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
from collections.abc import Mapping
from http import HTTPStatus
from importlib import resources
from typing import Any, NamedTuple

from .tokens import TokenService

__all__ = ["ASSET_TYPES", "Page", "ViewerPages"]

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


class Page(NamedTuple):
    """An HTTP answer: status, headers, body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


def _response(status: HTTPStatus, body: bytes, ctype: str,
              extra: list[tuple[str, str]] | None = None) -> Page:
    return Page(status.value, [("Content-Type", ctype), ("Content-Length", str(len(body))),
                               *_SECURITY, *(extra or [])], body)


def _json(status: HTTPStatus, data: dict[str, Any]) -> Page:
    return _response(status, json.dumps(data).encode(), "application/json")


def _bearer(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    return auth[7:].strip() or None if auth.lower().startswith("bearer ") else None


class ViewerPages:
    """The viewer's paths: ``answer`` is a Page for them, None for any other path."""

    def __init__(self, tokens: TokenService) -> None:
        self._tokens = tokens
        self._assets = _assets()

    async def answer(self, path: str, headers: Mapping[str, str]) -> Page | None:
        """``headers`` with lower-case names."""
        path = path.split("?", 1)[0]
        if path in ("/", "/web"):
            return _response(HTTPStatus.FOUND, b"", "text/plain", [("Location", "/web/")])
        if not path.startswith("/web/"):
            return None
        name = path[len("/web/"):] or "index.html"
        tokens = self._tokens
        if name == "status":
            token = _bearer(headers)
            if token is not None and await tokens.check(token) is not None:
                return _json(HTTPStatus.OK, {"ok": True})
            return _json(HTTPStatus.UNAUTHORIZED, {
                "ok": False, "reason": "unauthorized",
                "detail": "this token is not valid (revoked, expired or mistyped): "
                          "run `tether web` for a new link"})
        if name == "exchange":
            once = _bearer(headers)
            minted = await tokens.exchange(once) if once else None
            if minted is None:
                return _json(HTTPStatus.UNAUTHORIZED, {
                    "ok": False, "reason": "unauthorized",
                    "detail": "this link was used already or has expired: "
                              "run `tether web` for a new one"})
            return _json(HTTPStatus.OK, {"ok": True, **minted})
        body = self._assets.get(name)
        if body is None:
            return _response(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")
        ext = name[name.rfind("."):]
        return _response(HTTPStatus.OK, body, ASSET_TYPES[ext])
