"""The OpenAI-compatible HTTP endpoint on the owner's TCP port (docs/http.md).

``HttpFrontend`` is what the owner wires: the ASGI app (app.py) served by
uvicorn's HTTP protocol, one protocol instance per connection that server.py
routes here (any TCP request that is not a WebSocket upgrade), all inside the
owner's event loop: uvicorn parses and frames HTTP, this package decides.

May import: config, runtime, model, ledger, sessions; transport routes requests here, never the reverse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from ..config.core import Config
from ..ledger.admissions import AdmissionService
from ..ledger.events import EventBus
from ..ledger.journal import Journal
from .app import ApiApp, ApiLimits, Pages
from .request import DEFAULT_MODEL
from .turn import ApiTurns

__all__ = ["HttpFrontend"]

log = logging.getLogger("tether.http")


class HttpFrontend:
    def __init__(self, journal: Journal, bus: EventBus, admission_service: AdmissionService,
                 config: Config, token_id: Callable[[str], Awaitable[str | None]],
                 draining: Callable[[], bool], pages: Pages | None = None,
                 tool_names: frozenset[str] = frozenset()) -> None:
        import uvicorn  # only an owner with a TCP listener pays for it
        from uvicorn.server import ServerState

        models = (DEFAULT_MODEL,) + tuple(dict.fromkeys(
            m for m in (config.model.default, *config.http.models) if m and m != DEFAULT_MODEL))
        limits = ApiLimits(config=config.http, models=models,
                           max_text_chars=config.daemon.max_text_chars,
                           allowed_origins=config.daemon.tcp_allowed_origins,
                           tool_names=tool_names)
        turns = ApiTurns(journal, bus, admission_service, config.http)
        self.app = ApiApp(turns, token_id, limits, draining, pages)
        self._uv = uvicorn.Config(
            self.app, http="h11", ws="none", lifespan="off", log_config=None,
            access_log=False, proxy_headers=False, server_header=False,
            timeout_keep_alive=5,
            # open HTTP connections are bounded like WebSocket ones (uvicorn answers 503)
            limit_concurrency=config.daemon.max_connections)
        self._uv.load()
        self._state = ServerState()
        # uvicorn's own messages (an app error's traceback, a refused connection)
        # belong in the owner's log
        uv_log = logging.getLogger("uvicorn.error")
        for handler in logging.getLogger("tether").handlers:
            if handler not in uv_log.handlers:
                uv_log.addHandler(handler)

    def protocol(self) -> asyncio.Protocol:
        """A new connection's HTTP protocol (server.py hands it the transport)."""
        proto: asyncio.Protocol = self._uv.http_protocol_class(  # type: ignore[call-arg]
            config=self._uv, server_state=self._state, app_state={})
        return proto

    async def close(self, timeout: float = 3.0) -> None:
        """Finish responses in flight (bounded by ``timeout``), then close."""
        self.app.attempts.close()
        for conn in list(self._state.connections):
            conn.shutdown()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self._state.tasks:
                    await asyncio.sleep(0.05)
        for task in list(self._state.tasks):
            task.cancel()
        for conn in list(self._state.connections):
            if conn.transport is not None:
                conn.transport.abort()
