"""``TetherClient``: the async Python client of a tether owner.

One client holds one WebSocket connection: to the owner of a home (found, and
started if needed, by ``tether.clients.discovery``), or with a bearer token to a
TCP listener, one of several nodes of a fleet (``tether.clients.nodes``; an owner
there of another protocol is warned about, once: ``ProtocolMismatchWarning``).

- ``call(method, **params)``: one JSON-RPC call; the result dict, or the
  ``tether.rpc.errors.RpcError`` subclass the owner answered (``NotFound``,
  ``AdmissionConflict``, ...). A dropped connection raises ``ConnectionLost``.
- ``create_session``, ``resume``, ``submit``, ...: thin wrappers (docs/protocol.md).
- ``events(session_id)``: a ``SessionStream`` of the session's events in ``seq``
  order, no gap, no duplicate, re-subscribing by itself after a lost connection
  (``after_seq`` = the last seq it yielded) and after a ``session.replay_gap``.
- ``submit_and_wait(...)``: the resilient submit. It picks an ``input_id`` once;
  if the connection drops (owner restarted, node gone) it reconnects with backoff
  for up to ``retry_seconds`` (to the next node, in a fleet), resubmits the same
  ``input_id`` (the ledger answers with the same admission, never a second run),
  resumes the event stream where it stopped, and returns the final receipt.

Example (see docs/clients.md)::

    async with await TetherClient.connect() as client:
        snap = await client.create_session(source="script")
        receipt = await client.submit_and_wait(snap["session_id"], "Say hi", finite=True)
        print(receipt["result"]["text"])

Plain dicts, not ``tether.rpc.models``: pydantic would double the CLI's start-up time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, cast

from tether.rpc.errors import RuntimeDraining
from tether.rpc.home import HomeLayout, resolve_home
from tether.rpc.protocol import PROTOCOL

from .calls import Calls
from .discovery import START_TIMEOUT, OwnerUnavailable, ensure_owner, stopped_on_purpose
from .nodes import MAX_FRAME_BYTES, Failures, Nodes, attempt_errors, dial, parse_urls
from .routing import ConnectionLost, Router
from .stream import SessionStream

__all__ = [
    "ConnectionLost",
    "OwnerUnavailable",
    "SessionStream",
    "TetherClient",
    "new_input_id",
]

#: how long a resilient operation keeps reconnecting before giving up
RETRY_SECONDS = 60.0
#: while waiting for a turn with no events at all, look at the receipt this often
POLL_SECONDS = 15.0
TERMINAL = "terminal"
UNKNOWN = "unknown"

EventHandler = Callable[[dict[str, Any]], Any]


def new_input_id() -> str:
    """A fresh idempotency key for prompt.submit."""
    return "in_" + os.urandom(12).hex()


class TetherClient(Calls):
    """An async client of one tether owner; see the module docstring.

    Create it with ``await TetherClient.connect(...)``; use it as an async
    context manager or call ``close()``.
    """

    def __init__(self, home: Path | None, *, autostart: bool = True,
                 url: str | Sequence[str] | None = None, token: str | None = None,
                 retry_seconds: float = RETRY_SECONDS) -> None:
        self.home = home
        self.autostart = autostart
        self.nodes = Nodes(urls) if (urls := parse_urls(url)) else None
        self.token = token
        # a viewer (attach, interactive chat) never restarts an owner stopped on purpose
        self.keep_owner_stopped = False
        self.retry_seconds = retry_seconds
        self._conn: Router | None = None
        self._reconnecting = self._lock()
        self._closed = False
        self._instance = self._lost = cast("str | None", None)  # owner used last; lost

    # -- connecting -----------------------------------------------------------

    @classmethod
    async def connect(cls, home: str | os.PathLike[str] | None = None, autostart: bool = True,
                      *, url: str | Sequence[str] | None = None, token: str | None = None,
                      retry_seconds: float = RETRY_SECONDS) -> TetherClient:
        """Connect to the owner of ``home`` (resolved as SPEC §1), starting it if needed.

        With ``url`` (an owner's ``ws://127.0.0.1:PORT/`` TCP listener) and
        ``token`` the client connects there instead and never starts an owner.
        ``url`` may name several nodes of a fleet (a list, or one string with
        commas): they are tried in order, and a lost connection moves on to the
        next node (nodes.py). Raises ``OwnerUnavailable`` if none can be reached.
        """
        client = cls(None if parse_urls(url) else resolve_home(home), autostart=autostart,
                     url=url, token=token, retry_seconds=retry_seconds)
        await client._connect_until(time.monotonic() + START_TIMEOUT)
        return client

    @property
    def url(self) -> str | None:
        """The node connected to (or tried first next time); None for a home's owner."""
        return self.nodes.url if self.nodes is not None else None

    @property
    def descriptor(self) -> dict[str, Any] | None:
        """The owner's daemon.json as read when this connection was made (None over TCP)."""
        return self._conn.descriptor if self._conn is not None else None

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    @property
    def connection(self) -> Router | None:
        """The current connection (None before the first connect or after close)."""
        return self._conn

    # -- what the blocking client of the one-shot commands (blocking.py) replaces ----

    def _lock(self) -> Any:
        import asyncio

        return asyncio.Lock()

    async def _pause(self, seconds: float) -> None:
        import asyncio

        await asyncio.sleep(seconds)

    async def _owner(self, budget: float, autostart: bool) -> dict[str, Any]:
        """The descriptor of the home's live owner, started if ``autostart``."""
        assert self.home is not None
        return await ensure_owner(self.home, autostart=autostart, timeout=max(budget, 1.0))

    async def _dial_home(self, desc: dict[str, Any]) -> Router:
        """The connection to the owner ``desc`` describes, on its Unix socket."""
        from websockets.asyncio.client import unix_connect

        from .connection import Connection

        assert self.home is not None
        ws = await unix_connect(desc.get("socket") or str(HomeLayout(self.home).socket),
                                max_size=MAX_FRAME_BYTES, compression=None, open_timeout=10)
        return Connection(ws, desc)

    async def _open(self, url: str | None, budget: float) -> Router:
        if url is not None:
            from .connection import Connection, warn_on_other_protocol

            await warn_on_other_protocol(conn := Connection(await dial(url, self.token), None))
            return conn
        assert self.home is not None
        # an owner stopped on purpose is not started again by a client that lost it:
        # a viewer never owns the owner's lifetime (a live new owner is still used)
        stopped = bool(self.keep_owner_stopped and stopped_on_purpose(self.home, self._lost))
        try:
            desc = await self._owner(budget, self.autostart and not stopped)
        except OwnerUnavailable as exc:
            if stopped and exc.reason == "not_running":
                raise OwnerUnavailable("owner_stopped", f"the owner of {self.home} was stopped "
                                       "(`tether stop` or a signal)",
                                       "any new `tether` command starts it again") from None
            raise
        if desc.get("protocol") != PROTOCOL:
            raise OwnerUnavailable(
                "protocol_mismatch", f"the owner speaks {desc.get('protocol')!r}, this client "
                f"speaks {PROTOCOL!r}", "install matching versions of tether")
        home_conn = await self._dial_home(desc)
        self._instance, self._lost = desc.get("instance_id"), None
        return home_conn

    async def _connect_until(self, deadline: float, *, moving_on: bool = False) -> None:
        """Connect, trying each node in turn (a home's owner is the one "node"), with
        backoff between rounds, until ``deadline`` or a round where all failed for good."""
        targets: list[str | None] = [None] if self.nodes is None else [
            *self.nodes.order(moving_on=moving_on)]
        delay = 0.05
        while True:
            failures = Failures()
            for target in targets:
                try:
                    self._conn = await self._open(target, deadline - time.monotonic())
                except attempt_errors() as exc:
                    failures.add(exc, target)
                    continue
                if self.nodes is not None and target is not None:
                    self.nodes.worked(target)
                return
            if failures.final or time.monotonic() >= deadline:
                raise failures.error() from None
            await self._pause(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 2.0)

    async def reconnect(self, failed: Router | None = None) -> None:
        """Replace a lost connection, retrying with backoff for ``retry_seconds``.

        ``failed`` is the connection the caller saw fail; if the client has
        moved on to another live connection since, this returns at once.
        """
        if self._closed:
            raise ConnectionLost("the client is closed")
        async with self._reconnecting:
            current = self._conn
            if current is not None and not current.closed and current is not failed:
                return
            self._conn = None
            if current is not None and not current.closed:
                await current.close()
            self._lost = self._instance
            # a fleet: the next node first (the one lost is tried last)
            await self._connect_until(time.monotonic() + self.retry_seconds, moving_on=True)

    async def resilient(self, operation: Callable[[], Awaitable[Any]],
                        *, deadline: float | None = None) -> Any:
        """Run ``operation`` until it succeeds, reconnecting after a lost connection.

        Also waits out ``runtime_draining`` (an owner being restarted; in a fleet
        the next node is asked at once). Only use it for operations that are safe
        to repeat: reads, and prompt.submit with a fixed input_id. Gives up after
        ``retry_seconds`` of trying.
        """
        if deadline is None:
            deadline = time.monotonic() + self.retry_seconds
        drained = 0
        while True:
            conn = self._conn
            try:
                if conn is None or conn.closed:
                    raise ConnectionLost("not connected")
                return await operation()
            except ConnectionLost:
                if time.monotonic() >= deadline:
                    raise
                await self.reconnect(conn)
            except RuntimeDraining:
                # the owner is stopping; its connection closes shortly and the next
                # attempt reconnects to (or starts) the next owner
                if time.monotonic() >= deadline:
                    raise
                if self.nodes is not None and len(self.nodes.urls) > 1:
                    await self.reconnect(conn)
                    if (drained := drained + 1) % len(self.nodes.urls):
                        continue  # the next node may serve; pause once all were asked
                await self._pause(0.1)

    async def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def __aenter__(self) -> TetherClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- calls ----------------------------------------------------------------

    async def call(self, method: str, /, **params: Any) -> Any:
        """One JSON-RPC call on the current connection; ``None`` params are left out.

        Returns the result; raises the ``RpcError`` subclass of an error reply,
        ``ConnectionLost`` if the connection is (or goes) away.
        """
        if self._conn is None:
            raise ConnectionLost("not connected")
        body = {k: v for k, v in params.items() if v is not None}
        return await self._conn.request(method, body)

    # -- streams and the resilient submit ---------------------------------------

    def events(self, session_id: str, *, after_seq: int | None = None,
               resilient: bool = True) -> SessionStream:
        """The session's events after ``after_seq`` (default: from now on).

        ``async for event in client.events(sid): ...``; see ``SessionStream``.
        """
        return SessionStream(self, session_id, after_seq=after_seq, resilient=resilient)

    async def submit_and_wait(self, session_id: str, text: str, *, input_id: str | None = None,
                              finite: bool = False, on_event: EventHandler | None = None,
                              attachments: list[dict[str, Any]] | None = None,
                              stream: SessionStream | None = None,
                              **options: Any) -> dict[str, Any]:
        """Submit a prompt and wait until its admission is terminal; return the receipt.

        Survives lost connections and owner restarts (see the module docstring).
        ``on_event`` (sync or async) sees every event of the session from the
        submission on, in order, exactly once. Returns early with a receipt
        whose status is ``unknown`` if an owner crash left the turn unresolved, or
        a queued one with ``paused_by`` if it waits behind such a turn.
        Raises ``OwnerUnavailable``/``ConnectionLost`` when the owner stays away
        for ``retry_seconds``, and ``RpcError`` for refusals (e.g. conflict).
        """
        input_id = input_id or new_input_id()
        own_stream = stream is None
        stream = stream or self.events(session_id)

        async def submit() -> dict[str, Any]:
            return await self.submit(session_id, input_id, text, finite=finite,
                                     attachments=attachments, **options)

        async def emit(event: dict[str, Any]) -> None:
            if on_event is not None:
                result = on_event(event)
                if isinstance(result, Coroutine):
                    await result

        try:
            await self.resilient(stream.open)
            receipt = await self.resilient(submit)
            admission_id = receipt["admission_id"]
            attached = stream.attachments
            seen_complete = False
            while not seen_complete:
                if receipt["status"] == UNKNOWN or receipt.get("paused_by"):
                    break  # nothing will happen until someone settles the unknown
                if receipt["status"] == TERMINAL:
                    # Terminal but its message.complete not seen yet (it ended while
                    # we were away): it is durable, so replay up to it.
                    await self.resilient(stream.catch_up)
                    while (event := stream.take_buffered()) is not None:
                        await emit(event)
                    break
                event = await stream.get(POLL_SECONDS)
                if stream.attachments != attached:
                    # a new connection: resubmit the same input_id, which also tells
                    # us if the admission became unknown in an owner crash
                    attached = stream.attachments
                    receipt = await self.resilient(submit)
                if event is None:
                    receipt = await self.resilient(
                        lambda: self.receipt(session_id, admission_id=admission_id))
                    continue
                await emit(event)
                if event["type"] == "message.complete" and \
                        event.get("admission_id") == admission_id:
                    seen_complete = True
                    receipt = await self.resilient(
                        lambda: self.receipt(session_id, admission_id=admission_id))
            return receipt
        finally:
            if own_stream:
                stream.close()
