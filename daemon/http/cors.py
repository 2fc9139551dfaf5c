"""CORS for the browser origins of ``daemon.tcp_allowed_origins`` (docs/http.md).

A page of a listed origin may call the HTTP API: its preflight (``OPTIONS``)
is answered 204 with what it may send, and every response to it, errors and
streams included, names the origin back and the headers it may read. Any
other origin is refused (403) before anything else, as the WebSocket
listener refuses it.
"""

from __future__ import annotations

import re

__all__ = ["preflight", "response_headers"]

#: the methods of the HTTP API's routes
METHODS = "GET, POST, OPTIONS"
#: headers a client asks to send when the preflight names none (or names oddly)
DEFAULT_HEADERS = ("authorization, content-type, idempotency-key, x-tether-session-id, "
                   "x-tether-conversation, x-openwebui-chat-id")
#: the response headers a page may read (the rest are hidden by the browser)
EXPOSED = ("x-tether-session-id, x-tether-admission-id, idempotency-replayed, "
           "x-tether-ignored, x-should-retry, retry-after")
#: how long a browser may keep a preflight's answer
MAX_AGE_SECONDS = 600
#: a list of header names, as a preflight's Access-Control-Request-Headers has it
_NAMES = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*")


def response_headers(origin: str) -> list[tuple[bytes, bytes]]:
    """What every response to an allowed ``origin`` carries."""
    return [(b"access-control-allow-origin", origin.encode()),
            (b"access-control-expose-headers", EXPOSED.encode()),
            (b"vary", b"Origin")]


def preflight(origin: str, requested: str | None,
              private_network: bool = False) -> dict[str, str]:
    """The headers of a 204 answer to an allowed ``origin``'s preflight: the
    headers it asked to send are allowed (the bearer token among them). A
    browser that asks whether a public page may reach this private address
    (``Access-Control-Request-Private-Network``) is told yes: the user listed
    the origin."""
    asked = (requested or "").strip()
    extra = {"Access-Control-Allow-Private-Network": "true"} if private_network else {}
    return {**extra, "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": METHODS,
            "Access-Control-Allow-Headers": asked if _NAMES.fullmatch(asked)
            else DEFAULT_HEADERS,
            "Access-Control-Max-Age": str(MAX_AGE_SECONDS),
            "Vary": "Origin, Access-Control-Request-Headers"}
