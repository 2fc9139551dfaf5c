"""``TetherClient``: the async Python client of a tether owner.

One client holds one WebSocket connection to the owner of a home (found, and
started if needed, by ``tether.clients.discovery``) or to a TCP listener with a
bearer token. It offers:

- ``call(method, **params)``: one JSON-RPC call; the result dict, or the
  ``tether.rpc.errors.RpcError`` subclass the owner answered (``NotFound``,
  ``AdmissionConflict``, ...). A dropped connection raises ``ConnectionLost``.
- typed conveniences (``create_session``, ``resume``, ``submit``, ...), each a
  thin wrapper returning the wire dicts documented in docs/protocol.md.
- ``events(session_id)``: a ``SessionStream``, an async iterator over the
  session's events in ``seq`` order with no gap and no duplicate, which
  re-subscribes by itself after a lost connection (``session.resume`` with
  ``after_seq`` = the last seq it yielded) and after a ``session.replay_gap``.
- ``submit_and_wait(...)``: the resilient submit. It picks an ``input_id`` once
  and keeps it; if the connection drops (owner restarted, socket closed) it
  reconnects with backoff for up to ``retry_seconds``, resubmits the same
  ``input_id`` (the ledger answers with the same admission, never a second
  run), resumes the event stream where it stopped, and returns the admission's
  final receipt.

Example (see docs/clients.md)::

    async with await TetherClient.connect() as client:
        snap = await client.create_session(source="script")
        receipt = await client.submit_and_wait(snap["session_id"], "Say hi", finite=True)
        print(receipt["result"]["text"])

Events and replies are plain dicts: this module deliberately avoids the
pydantic models of ``tether.rpc.models`` (and so pydantic itself), which would
double the CLI's start-up time; the owner validates everything anyway.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect, unix_connect
from websockets.exceptions import InvalidHandshake, InvalidStatus, WebSocketException

from tether.rpc.errors import RpcError, RuntimeDraining

from .discovery import START_TIMEOUT, OwnerUnavailable, ensure_owner, resolve_home

__all__ = [
    "PROTOCOL",
    "ConnectionLost",
    "OwnerUnavailable",
    "SessionStream",
    "TetherClient",
    "new_input_id",
]

#: the wire protocol this client speaks (tether.rpc.methods.PROTOCOL; a test keeps
#: them equal; importing that module would import pydantic)
PROTOCOL = "tether/1"
#: largest frame the client accepts; a snapshot of a long session is one frame
MAX_FRAME_BYTES = 256 * 1024 * 1024
#: events buffered per session stream before the oldest are dropped for a replay
#: (a consumer that stops reading must not grow the client's memory without end)
MAX_BUFFERED_EVENTS = 10_000
#: events of sessions nobody iterates yet, kept so a stream opened just after
#: session.create misses nothing; per session, and sessions at most
MAX_BACKLOG_EVENTS = 1_000
MAX_BACKLOG_SESSIONS = 64
#: how long a resilient operation keeps reconnecting before giving up
RETRY_SECONDS = 60.0
#: while waiting for a turn with no events at all, look at the receipt this often
POLL_SECONDS = 15.0
TERMINAL = "terminal"
UNKNOWN = "unknown"

EventHandler = Callable[[dict[str, Any]], Any]


class ConnectionLost(ConnectionError):
    """The connection to the owner closed (owner restarted or stopped, socket dropped)."""


def new_input_id() -> str:
    """A fresh idempotency key for prompt.submit."""
    return "in_" + os.urandom(12).hex()


def _gap_marker(session_id: str, last_seq: int, reason: str) -> dict[str, Any]:
    return {"session_id": session_id, "seq": last_seq, "type": "session.replay_gap",
            "payload": {"last_seq": last_seq, "reason": reason}, "admission_id": None}


class _Inbox:
    """One consumer's bounded queue of one session's events on one connection."""

    __slots__ = ("session_id", "items", "_ready", "closed")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.items: deque[dict[str, Any]] = deque()
        self._ready = asyncio.Event()
        self.closed = False

    def put(self, event: dict[str, Any]) -> None:
        if len(self.items) >= MAX_BUFFERED_EVENTS:
            # Drop what is buffered and say so: the stream replays it from the owner,
            # which is the durable copy; keeping it here would only grow memory.
            first = self.items[0]
            self.items.clear()
            self.items.append(_gap_marker(self.session_id, first["seq"] - 1,
                                          "client_queue_overflow"))
        self.items.append(event)
        self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def get(self, timeout: float | None) -> dict[str, Any] | None:
        """The next event; None on timeout; ConnectionLost once closed and empty."""
        while not self.items:
            if self.closed:
                raise ConnectionLost("connection to the owner closed")
            self._ready.clear()
            if timeout is None:
                await self._ready.wait()
            else:
                try:
                    await asyncio.wait_for(self._ready.wait(), timeout)
                except TimeoutError:
                    return None
        return self.items.popleft()


class _Connection:
    """One WebSocket: request/reply matching and event routing to inboxes."""

    def __init__(self, ws: ClientConnection, descriptor: dict[str, Any] | None) -> None:
        self.ws = ws
        self.descriptor = descriptor
        self.closed = False
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._inboxes: dict[str, list[_Inbox]] = {}
        self._backlog: dict[str, deque[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read(), name="tether-client-reader")

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                try:
                    msg = orjson.loads(frame)
                except orjson.JSONDecodeError:
                    continue  # not ours to fix; the owner never sends this
                for item in msg if isinstance(msg, list) else (msg,):
                    if isinstance(item, dict):
                        self._route(item)
        except (WebSocketException, OSError):
            pass
        finally:
            self._lost()

    def _route(self, msg: dict[str, Any]) -> None:
        if msg.get("method") == "event":
            event = msg.get("params")
            if isinstance(event, dict) and isinstance(event.get("session_id"), str):
                self._deliver(event)
            return
        fut = self._pending.pop(msg.get("id"), None)  # type: ignore[arg-type]
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def _deliver(self, event: dict[str, Any]) -> None:
        sid = event["session_id"]
        inboxes = self._inboxes.get(sid)
        if inboxes:
            for inbox in inboxes:
                inbox.put(event)
            return
        # Nobody iterates this session yet (the reply to session.create has just
        # arrived and its caller has not run). Keep a bounded backlog for them.
        backlog = self._backlog.get(sid)
        if backlog is None:
            if len(self._backlog) >= MAX_BACKLOG_SESSIONS:
                self._backlog.pop(next(iter(self._backlog)))
            backlog = self._backlog[sid] = deque(maxlen=MAX_BACKLOG_EVENTS)
        backlog.append(event)

    def _lost(self) -> None:
        self.closed = True
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionLost("connection to the owner closed"))
        self._pending.clear()
        for inboxes in self._inboxes.values():
            for inbox in inboxes:
                inbox.close()

    def listen(self, session_id: str) -> _Inbox:
        inbox = _Inbox(session_id)
        if self.closed:
            inbox.close()
            return inbox
        for event in self._backlog.pop(session_id, ()):
            inbox.put(event)
        self._inboxes.setdefault(session_id, []).append(inbox)
        return inbox

    def unlisten(self, inbox: _Inbox) -> None:
        inboxes = self._inboxes.get(inbox.session_id)
        if inboxes and inbox in inboxes:
            inboxes.remove(inbox)
            if not inboxes:
                del self._inboxes[inbox.session_id]

    async def request(self, method: str, params: dict[str, Any],
                      timeout: float | None = None) -> Any:
        if self.closed:
            raise ConnectionLost("connection to the owner closed")
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        frame = orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        try:
            await self.ws.send(frame, text=True)
            reply = await (fut if timeout is None else asyncio.wait_for(fut, timeout))
        except (WebSocketException, OSError) as exc:
            raise ConnectionLost(f"connection to the owner closed: {exc}") from None
        finally:
            self._pending.pop(rid, None)
        if "error" in reply:
            raise RpcError.from_wire(reply["error"])
        return reply.get("result")

    async def close(self) -> None:
        await self.ws.close()
        await asyncio.gather(self._reader, return_exceptions=True)


class TetherClient:
    """An async client of one tether owner; see the module docstring.

    Create it with ``await TetherClient.connect(...)``; use it as an async
    context manager or call ``close()``.
    """

    def __init__(self, home: Path | None, *, autostart: bool = True, url: str | None = None,
                 token: str | None = None, retry_seconds: float = RETRY_SECONDS) -> None:
        self.home = home
        self.autostart = autostart
        self.url = url
        self.token = token
        self.retry_seconds = retry_seconds
        self._conn: _Connection | None = None
        self._reconnecting = asyncio.Lock()
        self._closed = False

    # -- connecting -----------------------------------------------------------

    @classmethod
    async def connect(cls, home: str | os.PathLike[str] | None = None, autostart: bool = True,
                      *, url: str | None = None, token: str | None = None,
                      retry_seconds: float = RETRY_SECONDS) -> TetherClient:
        """Connect to the owner of ``home`` (resolved as SPEC §1), starting it if needed.

        With ``url`` (the owner's ``ws://127.0.0.1:PORT/`` TCP listener) and
        ``token`` the client connects there instead and never starts an owner.
        Raises ``OwnerUnavailable`` if no owner can be reached or started.
        """
        client = cls(None if url else resolve_home(home), autostart=autostart, url=url,
                     token=token, retry_seconds=retry_seconds)
        await client._connect_until(time.monotonic() + START_TIMEOUT)
        return client

    @property
    def descriptor(self) -> dict[str, Any] | None:
        """The owner's daemon.json as read when this connection was made (None over TCP)."""
        return self._conn.descriptor if self._conn is not None else None

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    async def _open(self, budget: float) -> _Connection:
        if self.url:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
            ws = await connect(self.url, additional_headers=headers, max_size=MAX_FRAME_BYTES,
                               compression=None, proxy=None, open_timeout=10)
            return _Connection(ws, None)
        assert self.home is not None
        desc = await ensure_owner(self.home, autostart=self.autostart,
                                  timeout=max(budget, 1.0))
        if desc.get("protocol") != PROTOCOL:
            raise OwnerUnavailable(
                "protocol_mismatch", f"the owner speaks {desc.get('protocol')!r}, this client "
                f"speaks {PROTOCOL!r}", "install matching versions of tether")
        ws = await unix_connect(desc.get("socket") or str(self.home / "daemon.sock"),
                                max_size=MAX_FRAME_BYTES, compression=None, open_timeout=10)
        return _Connection(ws, desc)

    async def _connect_until(self, deadline: float) -> None:
        delay = 0.05
        while True:
            try:
                self._conn = await self._open(deadline - time.monotonic())
                return
            except OwnerUnavailable as exc:
                # a clean "cannot start"/"not running" is final; only timeouts retry
                if exc.reason != "start_timeout" or time.monotonic() >= deadline:
                    raise
            except InvalidStatus as exc:
                status = exc.response.status_code
                if 400 <= status < 500:  # refused for good (auth, origin, path)
                    body = exc.response.body.decode(errors="replace").strip()
                    raise OwnerUnavailable("refused", f"the owner refused the connection "
                                           f"(HTTP {status}): {body}",
                                           "check the URL and the token") from None
                if time.monotonic() >= deadline:  # 503: overloaded; try again
                    raise OwnerUnavailable("unreachable", f"the owner answered HTTP {status}",
                                           "try again later") from None
            except (OSError, InvalidHandshake, TimeoutError) as exc:
                # the owner went away between discovery and connect, is restarting,
                # or refused the handshake (overloaded): try again until the deadline
                if time.monotonic() >= deadline:
                    raise OwnerUnavailable(
                        "unreachable", f"cannot connect to the owner: {exc}",
                        "`tether status` shows whether it runs; its log is in <home>/logs"
                    ) from None
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 2.0)

    async def reconnect(self, failed: _Connection | None = None) -> None:
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
            await self._connect_until(time.monotonic() + self.retry_seconds)

    async def resilient(self, operation: Callable[[], Awaitable[Any]],
                        *, deadline: float | None = None) -> Any:
        """Run ``operation`` until it succeeds, reconnecting after a lost connection.

        Also waits out ``runtime_draining`` (an owner being restarted). Only use
        it for operations that are safe to repeat: reads, and prompt.submit with
        a fixed input_id. Gives up after ``retry_seconds`` of trying.
        """
        if deadline is None:
            deadline = time.monotonic() + self.retry_seconds
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
                await asyncio.sleep(0.1)

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

    async def describe(self) -> dict[str, Any]:
        return await self.call("runtime.describe")

    async def ping(self) -> dict[str, Any]:
        return await self.call("ping")

    async def shutdown(self) -> dict[str, Any]:
        """Ask the owner to drain and exit (Unix socket only)."""
        return await self.call("runtime.shutdown")

    async def create_token(self, label: str | None = None) -> dict[str, Any]:
        return await self.call("token.create", label=label)

    async def create_session(self, *, request_id: str | None = None, source: str | None = None,
                             title: str | None = None, cwd: str | None = None,
                             **options: Any) -> dict[str, Any]:
        """session.create; ``options`` are turn options used as the session's defaults."""
        return await self.call("session.create", request_id=request_id, source=source,
                               title=title, cwd=cwd, **options)

    async def resume(self, session_id: str, after_seq: int | None = None) -> dict[str, Any]:
        return await self.call("session.resume", session_id=session_id, after_seq=after_seq)

    async def list_sessions(self, limit: int | None = None,
                            cursor: str | None = None) -> dict[str, Any]:
        return await self.call("session.list", limit=limit, cursor=cursor)

    async def events_since(self, session_id: str, after_seq: int = 0,
                           limit: int | None = None) -> dict[str, Any]:
        return await self.call("session.events.since", session_id=session_id,
                               after_seq=after_seq, limit=limit)

    async def all_events_since(self, session_id: str, after_seq: int = 0) -> AsyncIterator[dict]:
        """Every stored event after ``after_seq``, paging session.events.since."""
        while True:
            page = await self.events_since(session_id, after_seq)
            for event in page["events"]:
                yield event
            if not page["events"] or page["events"][-1]["seq"] >= page["last_seq"]:
                return
            after_seq = page["events"][-1]["seq"]

    async def detach(self, session_id: str) -> dict[str, Any]:
        return await self.call("session.detach", session_id=session_id)

    async def interrupt(self, session_id: str) -> dict[str, Any]:
        return await self.call("session.interrupt", session_id=session_id)

    async def submit(self, session_id: str, input_id: str, text: str, *, finite: bool = False,
                     attachments: list[dict[str, Any]] | None = None,
                     **options: Any) -> dict[str, Any]:
        """prompt.submit once (no retry); ``options`` are per-turn options."""
        return await self.call("prompt.submit", session_id=session_id, input_id=input_id,
                               text=text, finite=finite, attachments=attachments, **options)

    async def receipt(self, session_id: str, *, admission_id: str | None = None,
                      input_id: str | None = None) -> dict[str, Any]:
        return await self.call("prompt.receipt", session_id=session_id,
                               admission_id=admission_id, input_id=input_id)

    async def cancel(self, session_id: str, admission_id: str) -> dict[str, Any]:
        return await self.call("prompt.cancel", session_id=session_id, admission_id=admission_id)

    async def resolve_unknown(self, session_id: str, admission_id: str) -> dict[str, Any]:
        return await self.call("prompt.resolve_unknown", session_id=session_id,
                               admission_id=admission_id)

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
        whose status is ``unknown`` if an owner crash left the turn unresolved.
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
                if asyncio.iscoroutine(result):
                    await result

        try:
            await self.resilient(stream.open)
            receipt = await self.resilient(submit)
            admission_id = receipt["admission_id"]
            attached = stream.attachments
            seen_complete = False
            while not seen_complete:
                if receipt["status"] == UNKNOWN:
                    break
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


class SessionStream:
    """One session's events in ``seq`` order, each exactly once, across reconnects.

    ``open()`` subscribes (``session.resume``) and returns the snapshot; after
    that, ``get()`` / ``async for`` yield the events after the snapshot (or
    after ``after_seq``). On a lost connection a resilient stream reconnects
    and resumes with ``after_seq`` = the last seq it yielded; on a
    ``session.replay_gap`` or a hole in the seqs it fetches the missing events
    with ``session.events.since``. ``attachments`` counts subscriptions made,
    so a caller can notice that a reconnect happened.
    """

    def __init__(self, client: TetherClient, session_id: str, *, after_seq: int | None = None,
                 resilient: bool = True) -> None:
        self.client = client
        self.session_id = session_id
        self.last_seq = after_seq
        self.resilient = resilient
        self.snapshot: dict[str, Any] | None = None
        self.attachments = 0
        self._inbox: _Inbox | None = None
        self._conn: _Connection | None = None
        self._ready: deque[dict[str, Any]] = deque()

    async def open(self) -> dict[str, Any]:
        """Subscribe if not subscribed yet; the snapshot of the latest subscription."""
        if self._inbox is None or self._inbox.closed:
            await self._attach()
        assert self.snapshot is not None
        return self.snapshot

    async def _attach(self) -> None:
        conn = self.client._conn
        if conn is None or conn.closed:
            raise ConnectionLost("not connected")
        inbox = conn.listen(self.session_id)  # before resume: nothing can slip past
        try:
            snap = await conn.request("session.resume", {"session_id": self.session_id} | (
                {} if self.last_seq is None else {"after_seq": self.last_seq}))
        except BaseException:
            conn.unlisten(inbox)
            raise
        self._detach_inbox()
        self._inbox, self._conn = inbox, conn
        self.snapshot = snap
        self.attachments += 1
        if self.last_seq is None:
            self.last_seq = snap["last_seq"]
        for event in snap.get("events") or ():
            self._accept(event)

    def _detach_inbox(self) -> None:
        if self._inbox is not None and self._conn is not None:
            self._conn.unlisten(self._inbox)
        self._inbox = self._conn = None

    def _accept(self, event: dict[str, Any]) -> bool:
        """Buffer ``event`` if it is the next seq; False if it leaves a hole."""
        assert self.last_seq is not None
        seq = event.get("seq")
        if not isinstance(seq, int) or seq <= self.last_seq:
            return True  # a duplicate (snapshot and stream overlap): already had it
        if seq != self.last_seq + 1:
            return False
        self.last_seq = seq
        self._ready.append(event)
        return True

    async def catch_up(self) -> None:
        """Fetch every stored event after ``last_seq`` into the buffer."""
        if self.last_seq is None:
            await self.open()
            return
        async for event in self.client.all_events_since(self.session_id, self.last_seq):
            self._accept(event)

    def take_buffered(self) -> dict[str, Any] | None:
        """The next event already received, without waiting (None if there is none)."""
        return self._ready.popleft() if self._ready else None

    async def get(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next event; None if ``timeout`` seconds pass with none.

        Raises ``ConnectionLost`` (non-resilient stream) or ``OwnerUnavailable``
        (the owner stayed away for the client's ``retry_seconds``).
        """
        while not self._ready:
            if self._inbox is None:
                await self._reattach()
                continue
            try:
                event = await self._inbox.get(timeout)
            except ConnectionLost:
                if not self.resilient:
                    raise
                await self._reattach()
                continue
            if event is None:
                return None
            if event.get("type") == "session.replay_gap":
                # the owner unsubscribed us (we were too slow): resubscribe from where
                # we are; the resume snapshot carries what we missed
                await self.client.resilient(self._attach)
            elif not self._accept(event):
                await self.client.resilient(self.catch_up)
                self._accept(event)
        return self._ready.popleft()

    async def _reattach(self) -> None:
        failed = self._conn
        self._detach_inbox()
        await self.client.reconnect(failed)
        await self.client.resilient(self._attach)

    def __aiter__(self) -> SessionStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._inbox is None and self.snapshot is None:
            await self.client.resilient(self.open)
        event = await self.get()
        assert event is not None
        return event

    def close(self) -> None:
        """Stop buffering events (the owner keeps sending until session.detach)."""
        self._detach_inbox()
