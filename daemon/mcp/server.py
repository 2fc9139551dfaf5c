"""One MCP server: its connection, its state and its tools.

A server starts on first need (the first agent run offering the ``mcp``
toolset, or ``tether mcp tools``), not when the owner starts, and then stays
up for every turn. Its connection lives in one task (`_run`), because the
``mcp`` client's scopes must be entered and left by the same task; calls are
made from the turns' tasks over the open connection.

States: ``idle`` (not started yet), ``starting``, ``ready``, ``failed`` (it
would not start, or stopped: ``error`` says why, ``retry_at`` when it is tried
again), ``disabled`` (``enabled: false``), ``stopped`` (the owner is closing).
A server that stops is started again at the next need. A server whose start
failed is tried again in the background (nobody waits for it), when its
backoff allows: 1 s, 2 s, 4 s, ... at most 60 s after the last failure.
stderr of a stdio server goes to ``<home>/logs/mcp-<name>.log``; its last lines
are quoted when it will not start. A stdio server runs in the sandbox
(``Sandbox.server_argv``) unless its ``sandbox: false`` or no sandbox can be
made; its ``HOME`` is then ``<home>/mcp-state/<name>``, the one place it writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ..config.core import McpServerConfig
from ..toolsets.sandbox import Sandbox

__all__ = ["McpServer", "Unavailable", "allowed", "expand"]

T = TypeVar("T")

log = logging.getLogger("tether.mcp")

MAX_BACKOFF_SECONDS = 60.0
#: how long a stopping server may take to close (a stdio server: stdin closed, then
#: SIGTERM, then SIGKILL)
CLOSE_SECONDS = 8.0
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Unavailable(Exception):
    """The server cannot take a call now; the message says why, for the model."""


def expand(value: str, env: Mapping[str, str]) -> str:
    """``${VAR}`` replaced by the owner's environment (empty when unset)."""
    return _VAR.sub(lambda m: env.get(m.group(1), ""), value)


def _why(exc: BaseException) -> str:
    """One line for an exception, looking into exception groups (anyio task groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


def allowed(name: str, allow: tuple[str, ...], deny: tuple[str, ...]) -> bool:
    import fnmatch

    if any(fnmatch.fnmatchcase(name, p) for p in deny):
        return False
    return not allow or any(fnmatch.fnmatchcase(name, p) for p in allow)


class McpServer:
    def __init__(self, config: McpServerConfig, *, env: Mapping[str, str], logs: Path,
                 version: str, sandbox: Sandbox | None = None,
                 state: Path | None = None) -> None:
        self.config = config
        self._sandbox = sandbox
        #: a sandboxed server's own writable directory (its HOME)
        self.state_dir = (state or logs.parent / "mcp-state") / config.name
        self.name = config.name
        self.state = "idle" if config.enabled else "disabled"
        self.error: str | None = None
        self.retry_at: float | None = None  # wall clock, for showing
        self.tools: list[Any] = []  # mcp Tool objects the config lets through
        #: what the server said it offers (tools, resources, prompts), once started
        self.capabilities: Any = None
        self.protocol: str | None = None
        self.starts = 0
        self._env = env
        self._log_path = logs / f"mcp-{config.name}.log"
        self._version = version
        self._failures = 0
        self._next_attempt = 0.0  # monotonic
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()  # connections being closed
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._stale = False
        self._closed = False
        #: its last start failed (not: it stopped while running)
        self.start_failed = False
        self._retry: asyncio.Task[bool] | None = None

    @property
    def sandboxed(self) -> bool:
        """Whether this server runs in the sandbox (a stdio server, unless the
        configuration or the missing sandbox says otherwise)."""
        return bool(self.config.command and self.config.sandbox
                    and self._sandbox is not None and self._sandbox.serves())

    def boundary(self) -> str | None:
        """What the server runs in, for people: None for a url server."""
        cfg, sandbox = self.config, self._sandbox
        if not cfg.command:
            return None
        if self.sandboxed:
            return f"sandboxed, network {'on' if cfg.network else 'off'}, writes only " \
                   f"{self.state_dir}"
        if not cfg.sandbox:
            why = f"mcp.servers.{cfg.name}.sandbox is false"
        elif sandbox is None or sandbox.config.mode == "off":
            why = "sandbox.mode is off"
        else:
            why = sandbox.probe.why or "no sandbox can be made"
        return f"none — {why}; it runs as the owner's user"

    # -- starting and stopping ---------------------------------------------

    async def ensure(self, *, now: bool = False) -> bool:
        """Start the server if it is not running and may be tried now (``now``: backoff
        or not); refresh its tools if it said they changed. True when it is ready."""
        if self.state == "ready":
            if self._stale:
                await self._relist()
            return self.state == "ready"
        if self._closed or not self.config.enabled:
            return False
        async with self._lock:
            if self.state != "ready" and (now or time.monotonic() >= self._next_attempt):
                await self._start()
        return self.state == "ready"

    def retry_in_background(self) -> None:
        """Try a server whose start failed again, when its backoff allows, without
        making anyone wait for it (a turn meanwhile gets the stand-in's error)."""
        if self._closed or (self._retry is not None and not self._retry.done()):
            return
        if time.monotonic() >= self._next_attempt:
            self._retry = asyncio.create_task(self.ensure(), name=f"mcp-retry-{self.name}")

    async def _start(self) -> None:
        self.state, self.starts = "starting", self.starts + 1
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = stop = asyncio.Event()
        self._task = asyncio.create_task(self._run(ready, stop), name=f"mcp-{self.name}")
        timeout = self.config.timeout_seconds
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            self._failed(f"it did not finish starting within {timeout:g} s")
        except Exception as exc:
            self._failed(_why(exc))
        else:
            self.state, self.error, self.retry_at, self._failures = "ready", None, None, 0
            self.start_failed = False
            log.info("MCP server %s ready (%d tools, protocol %s)", self.name, len(self.tools),
                     self.protocol)

    def _failed(self, why: str) -> None:
        tail = self._stderr_tail()
        self.error = f"{why}{'; its stderr ends: ' + tail if tail else ''}"
        delay = min(2.0 ** self._failures, MAX_BACKOFF_SECONDS)
        self._failures += 1
        self._next_attempt = time.monotonic() + delay
        self.retry_at = time.time() + delay
        self.state, self.start_failed = "failed", True
        log.warning("MCP server %s failed: %s (next attempt in %g s)", self.name, self.error,
                    delay)
        self._discard(cancel=True)  # still starting: nothing to close gracefully

    def _died(self, why: str) -> None:
        """The connection broke while the server was ready: the next need starts it
        again at once (the backoff is for a server that will not start)."""
        if self.state != "ready":
            return
        self.state, self.error, self.retry_at = "failed", why, None
        self._next_attempt = 0.0
        log.warning("MCP server %s stopped: %s", self.name, why)
        self._discard(cancel=False)

    def _discard(self, *, cancel: bool) -> None:
        """Let the current connection go, without waiting for it to close (a stdio
        server gets seconds to exit): nobody's turn waits for that; close() does."""
        self._stop.set()
        task, self._task = self._task, None
        if task is None or task.done():
            return
        if cancel:
            task.cancel()
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Close the connection (and any still closing), at most CLOSE_SECONDS."""
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
            with contextlib.suppress(BaseException):
                await self._retry
        self._discard(cancel=False)
        tasks = list(self._closing)
        if tasks:
            _done, late = await asyncio.wait(tasks, timeout=CLOSE_SECONDS)
            for task in late:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.config.enabled:
            self.state = "stopped"

    def _stderr_tail(self) -> str:
        if not self.config.command:
            return ""
        try:
            with open(self._log_path, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 600))
                lines = f.read().decode("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(line.strip() for line in lines[-3:] if line.strip())[:400]

    # -- the connection's task ---------------------------------------------

    async def _run(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        """One connection's life; ``stop`` is its own (a runner still closing must not
        touch the state of the one started after it)."""
        import mcp_types
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        cfg = self.config
        try:
            async with contextlib.AsyncExitStack() as stack:
                if cfg.command:
                    self._log_path.parent.mkdir(parents=True, exist_ok=True)
                    errlog = stack.enter_context(open(self._log_path, "a", encoding="utf-8"))
                    errlog.write(f"--- tether starts {cfg.command} at {time.ctime()}\n")
                    errlog.flush()
                    argv = [cfg.command, *cfg.args]
                    env = {k: expand(v, self._env) for k, v in cfg.env}
                    if self.sandboxed:
                        assert self._sandbox is not None
                        try:
                            here: str | None = os.getcwd()
                        except OSError:  # the owner's directory is gone
                            here = None
                        argv = self._sandbox.server_argv(
                            argv, state_dir=str(self.state_dir), network=cfg.network,
                            cwd=here)
                        env = {"HOME": str(self.state_dir), **env}
                    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
                    transport: Any = stdio_client(params, errlog=errlog)
                else:
                    assert cfg.url is not None
                    http = await stack.enter_async_context(create_mcp_http_client(
                        headers={k: expand(v, self._env) for k, v in cfg.headers}))
                    transport = streamable_http_client(cfg.url, http_client=http)
                client = Client(transport, cache=None, read_timeout_seconds=cfg.timeout_seconds,
                                message_handler=self._on_message,
                                client_info=mcp_types.Implementation(name="tether",
                                                                     version=self._version))
                await stack.enter_async_context(client)
                self.protocol = client.protocol_version
                tools = await self._list(client)
                if stop.is_set():  # given up on (timeout, shutdown) meanwhile
                    if not ready.done():
                        ready.set_exception(RuntimeError("it was stopped while starting"))
                    return
                self.tools, self._client = tools, client
                self.capabilities = client.server_capabilities
                ready.set_result(None)
                listener = None
                caps = client.server_capabilities.tools
                if caps is not None and caps.list_changed and \
                        client.protocol_version >= "2026":
                    listener = asyncio.create_task(self._listen(client))
                try:
                    await stop.wait()
                finally:
                    if self._stop is stop:
                        self._client = None
                    if listener is not None:
                        listener.cancel()
                        await asyncio.gather(listener, return_exceptions=True)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(RuntimeError(_why(exc)))
            elif not isinstance(exc, asyncio.CancelledError) and self._stop is stop:
                self._died(f"its connection failed: {_why(exc)}")
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            if self._stop is stop:
                self._client = None

    async def _list(self, client: Any) -> list[Any]:
        tools: list[Any] = []
        cursor = None
        for _ in range(100):  # a server that pages forever does not hang the owner
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self._stale = False
        return [t for t in tools
                if allowed(t.name, self.config.tools_allow, self.config.tools_deny)]

    async def _relist(self) -> None:
        client = self._client
        if client is None:
            return
        try:
            self.tools = await asyncio.wait_for(self._list(client), self.config.timeout_seconds)
            log.info("MCP server %s: tools changed (%d now)", self.name, len(self.tools))
        except Exception as exc:
            self._died(f"listing its tools failed: {_why(exc)}")

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._stale = True

    async def _listen(self, client: Any) -> None:
        """Tool-list changes on a 2026-era connection (``subscriptions/listen``)."""
        with contextlib.suppress(Exception):
            async with client.listen(tools_list_changed=True) as sub:
                async for _event in sub:
                    self._stale = True

    # -- calls -------------------------------------------------------------

    def why_unavailable(self) -> str:
        if self.state == "disabled":
            return f"the MCP server {self.name!r} is disabled in config.yaml"
        when = ""
        if self.retry_at is not None:
            when = f"; tether tries again in {max(0, round(self.retry_at - time.time()))} s"
        return (f"the MCP server {self.name!r} is not available: "
                f"{self.error or self.state}{when}")

    async def call(self, tool: str, args: dict[str, Any], progress: Any = None) -> Any:
        """The tool's CallToolResult; Unavailable when the server is down or went
        down during the call; an MCPError for an error the server answered."""
        timeout = self.config.timeout_seconds
        return await self.request(
            lambda c: c.call_tool(tool, args, read_timeout_seconds=timeout,
                                  progress_callback=progress), "the tool may or may not have run")

    async def request(self, ask: Callable[[Any], Awaitable[T]], unsure: str = "") -> T:
        """``ask(client)`` on the open connection, bounded by timeout_seconds;
        Unavailable when the server is down or went down meanwhile (``unsure``: what
        that leaves unknown); an MCPError for an error the server answered."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        client = self._client
        if client is None or self.state != "ready":
            raise Unavailable(self.why_unavailable())
        timeout = self.config.timeout_seconds
        try:
            return await asyncio.wait_for(ask(client), timeout + 5)
        except TimeoutError:
            raise Unavailable(f"the MCP server {self.name!r} did not answer within "
                              f"{timeout:g} s (mcp.servers.{self.name}.timeout_seconds)") from None
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise
            self._died("its connection closed")
        except (OSError, EOFError) as exc:
            self._died(f"its connection failed: {_why(exc)}")
        except Exception as exc:
            if type(exc).__module__.startswith("anyio"):  # a closed or broken stream
                self._died(f"its connection failed: {_why(exc)}")
            else:
                raise
        raise Unavailable(f"the MCP server {self.name!r} stopped during the call"
                          f"{' (' + unsure + ')' if unsure else ''}; tether starts it again "
                          "for the next call")
