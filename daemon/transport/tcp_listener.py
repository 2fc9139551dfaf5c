"""The owner's TCP listener (WebSocket, the viewer page, the HTTP API), opened at
start (``tether serve --tcp``) or later, on demand, by ``runtime.listen_tcp``
(``tether web`` on an owner started without one): running turns and open
chats go on, and the listener stays until the owner stops."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tether.rpc.dispatch import Dispatcher
from tether.rpc.errors import InvalidParams
from tether.rpc.models.tokens import ListenTcpParams

from .server import Call, Listeners, tcp_address

__all__ = ["TcpListener", "register_listen_method", "DEFAULT_ADDRESS"]

#: where runtime.listen_tcp listens when not told (the `tether web` default)
DEFAULT_ADDRESS = "127.0.0.1:8765"


class TcpListener:
    """``make_api()`` builds the HTTP side served on the same port; ``opened(url)`` is
    told once the port listens (the owner rewrites daemon.json with it)."""

    def __init__(self, listeners: Listeners, make_api: Callable[[], Any], *,
                 allow_remote: bool, opened: Callable[[str], None]) -> None:
        self._listeners = listeners
        self._make_api = make_api
        self._allow_remote = allow_remote
        self._opened = opened
        self._lock = asyncio.Lock()
        self.api: Any = None

    @property
    def url(self) -> str | None:
        return self._listeners.tcp_url

    async def open(self, address: str) -> tuple[str, bool]:
        """Listen on ``address`` unless listening already: (the url, whether opened now).
        A bad or refused address is ValueError; a port in use is OSError."""
        async with self._lock:
            if self._listeners.tcp_url:
                return self._listeners.tcp_url, False
            host, port = tcp_address(address, allow_remote=self._allow_remote)
            api = self._make_api()
            url = await self._listeners.start_tcp(host, port, allow_remote=self._allow_remote,
                                                  http=api.protocol)
            self.api = api
            self._opened(url)
            return url, True

    async def close(self) -> None:
        if self.api is not None:
            await self.api.close()


def register_listen_method(d: Dispatcher, *, listener: Callable[[], TcpListener],
                           draining: Callable[[], bool]) -> None:
    """runtime.listen_tcp, over the Unix socket only (whoever may use the socket may
    open the port; TCP clients need a token from the socket anyway)."""

    @d.register("runtime.listen_tcp")
    async def listen_tcp(p: ListenTcpParams, call: Call) -> dict[str, Any]:
        unix_only = {"loc": "", "msg": "accepted over the Unix socket only", "type": "transport"}
        if call.transport != "unix":
            raise InvalidParams("runtime.listen_tcp is only accepted over the Unix socket",
                                fields=[unix_only])
        if draining():
            raise InvalidParams("the owner is stopping; start a new one with `tether web`")
        address = p.address or DEFAULT_ADDRESS
        try:
            url, opened = await listener().open(address)
        except ValueError as exc:
            raise InvalidParams(str(exc), fields=[{"loc": "address", "msg": str(exc),
                                                   "type": "value_error"}]) from None
        except OSError as exc:
            raise InvalidParams(f"cannot listen on {address}: {exc.strerror or exc}",
                                fields=[{"loc": "address", "msg": "in use or not allowed",
                                         "type": "os_error"}]) from None
        return {"tcp_url": url, "opened": opened}
