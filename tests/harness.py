"""Test harness: the real owner as a subprocess, and a raw JSON-RPC WebSocket peer.

``OwnerProcess`` runs ``python -m tether.daemon --home H`` exactly as autostart
does and waits for its descriptor. ``Peer`` speaks JSON-RPC over the owner's
real Unix socket with no client-library help, so tests see the wire as any
third-party client would: ``call`` returns the whole reply object (result or
error), events are collected per session in arrival order.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, unix_connect

REPO = Path(__file__).resolve().parents[1]


async def until(check: Callable[[], Any], what: str = "condition", *,
                timeout: float = 60.0) -> Any:
    """Poll ``check`` until it returns something truthy, and return that.

    A wait, not a timing assertion: ``timeout`` only bounds how long a broken
    run hangs before it fails with ``TimeoutError`` naming ``what``.
    """
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        await asyncio.sleep(0.02)
    return value


def write_config(home: Path, provider_url: str | None = None, **sections: dict[str, Any]) -> None:
    """config.yaml pointing at a fake provider (custom) plus extra sections."""
    import yaml

    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    cfg: dict[str, Any] = {}
    if provider_url:
        cfg["model"] = {"provider": "custom", "base_url": provider_url, "default": "test-model",
                        "api_key": "local-test-only", "retry_backoff_seconds": 0.01}
    for name, values in sections.items():
        cfg.setdefault(name, {}).update(values)
    (home / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")


#: the store every owner a test starts keeps its state in: None for the home's
#: state.db; a postgresql:// URL while a test runs on PostgreSQL (tests/e2e/conftest.py)
STORE_URL: str | None = None


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "TETHER_", "PYTEST_"))}
    env.update(TETHER_HOME=str(home), PYTHONDONTWRITEBYTECODE="1", LANG="C.UTF-8")
    if STORE_URL is not None:
        env["TETHER_STORE"] = STORE_URL
    env.update(extra)
    return env


class OwnerProcess:
    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.args = args
        self.env = env or clean_env(home)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20.0) -> OwnerProcess:
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        desc = self.home / "daemon.json"
        log = open(self.home / "owner-stderr.log", "ab")  # noqa: SIM115
        # an owner armed with a test fault runs through tests/faults.py, which hangs
        # the hooks on the daemon's seams first (nothing of them ships in the daemon)
        armed = any(k.startswith("TETHER_FAULT") for k in self.env)
        module = "faults" if armed else "tether.daemon"
        env = dict(self.env)
        if armed:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(Path(__file__).parent), env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "--home", str(self.home), *self.args],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"owner exited with {self.proc.returncode}: "
                                   + (self.home / "owner-stderr.log").read_text()[-2000:])
            try:
                data = json.loads(desc.read_text())
                if data.get("pid") == self.proc.pid:
                    self.descriptor = data
                    return self
            except (FileNotFoundError, json.JSONDecodeError):
                pass
            time.sleep(0.02)
        self.kill()
        raise TimeoutError("owner did not write its descriptor")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL the owner (if it still runs: a test may have killed it itself),
        reap it, and on PostgreSQL wait until its writer's backend has ended."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._writer_gone(self.proc.pid)

    def _writer_gone(self, pid: int, timeout: float = 10.0) -> None:
        """On PostgreSQL: a COMMIT the server had already received when the owner
        died still lands, after the process is gone; a test reading the ledger
        before its backend ended would miss it."""
        if STORE_URL is None or "application_name=" in self.env.get("TETHER_STORE", ""):
            return
        import pgstore

        name = f"tether-writer {pid}"
        deadline = time.monotonic() + timeout
        while pgstore.rows(STORE_URL, "SELECT 1 FROM pg_stat_activity "
                                      "WHERE application_name = ?", name):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} still has a backend")
            time.sleep(0.02)

    def __enter__(self) -> OwnerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        try:
            if self.alive:
                self.stop()
        finally:
            self.kill()


class Peer:
    """A raw JSON-RPC peer on the owner's socket."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._ids = itertools.count(1)
        self._waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self.other: list[dict[str, Any]] = []  # replies with id null, stray frames
        self._event_arrived = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, home: Path, **kwargs: Any) -> Peer:
        ws = await unix_connect(str(home / "daemon.sock"), max_size=None, **kwargs)
        return cls(ws)

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                msg = json.loads(frame)
                if isinstance(msg, dict) and msg.get("method") == "event":
                    self.events.append(msg["params"])
                    self._event_arrived.set()
                elif isinstance(msg, dict) and msg.get("id") in self._waiting:
                    self._waiting.pop(msg["id"]).set_result(msg)
                else:
                    self.other.append(msg)
                    self._event_arrived.set()
        except Exception:  # noqa: BLE001 - connection closed; waiters see it below
            pass
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionError("connection closed"))

    async def send_raw(self, frame: str | bytes) -> None:
        await self.ws.send(frame)

    async def call(self, method: str, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                       "params": params}))
        return await asyncio.wait_for(fut, timeout)

    async def result(self, method: str, **params: Any) -> dict[str, Any]:
        reply = await self.call(method, **params)
        assert "result" in reply, reply
        return reply["result"]

    async def wait_event(self, pred: Any, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for ev in self.events[seen:]:
                if pred(ev):
                    return ev
            seen = len(self.events)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no matching event; got {[e['type'] for e in self.events]}")
            self._event_arrived.clear()
            try:
                await asyncio.wait_for(self._event_arrived.wait(), remaining)
            except TimeoutError:
                pass

    async def wait_terminal(self, session_id: str, admission_id: str,
                            timeout: float = 30.0) -> dict[str, Any]:
        """Poll the receipt until terminal (independent of event delivery)."""
        deadline = time.monotonic() + timeout
        while True:
            r = await self.result("prompt.receipt", session_id=session_id,
                                  admission_id=admission_id)
            if r["status"] == "terminal":
                return r
            if time.monotonic() > deadline:
                raise TimeoutError(f"admission still {r['status']}")
            await asyncio.sleep(0.05)

    async def all_events(self, session_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        """Every stored event after ``after_seq``, paging as a client must: a page
        ends early once it holds about a MiB of payload (docs/protocol.md)."""
        return await page_through(
            lambda after: self.result("session.events.since", session_id=session_id,
                                      after_seq=after, limit=10_000), after_seq)

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()

    async def __aenter__(self) -> Peer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def page_through(fetch: Callable[[int], Awaitable[dict[str, Any]]],
                       after_seq: int = 0) -> list[dict[str, Any]]:
    """Call ``fetch(after_seq)`` (a session.events.since result) until ``last_seq``."""
    out: list[dict[str, Any]] = []
    while True:
        page = await fetch(out[-1]["seq"] if out else after_seq)
        out += page["events"]
        if not page["events"] or out[-1]["seq"] >= page["last_seq"]:
            return out


def db_rows(home: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Read the store directly, as an inspector would: state.db read-only, or the
    PostgreSQL schema the test's owners use."""
    if STORE_URL is not None:
        import pgstore

        return pgstore.rows(STORE_URL, sql, *args)
    with closing(sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)) as db:
        return db.execute(sql, args).fetchall()


def db_dicts(home: Path, sql: str, *args: Any) -> list[dict[str, Any]]:
    """As db_rows, each row a dict by column name."""
    if STORE_URL is not None:
        import pgstore

        return pgstore.dicts(STORE_URL, sql, *args)
    with closing(sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute(sql, args)]


def stored_bytes(home: Path) -> bytes:
    """Everything the store holds, as bytes to search: state.db with its WAL, or
    every row of every table of the test's PostgreSQL schema as text."""
    if STORE_URL is not None:
        import pgstore

        return pgstore.dump(STORE_URL).encode()
    return b"".join(p.read_bytes() for p in sorted(home.glob("state.db*")) if p.is_file())


def table_counts(home: Path, url: str | None = None) -> dict[str, int]:
    """Rows per table of the store (tables of tether's schema only): state.db, or
    the PostgreSQL schema at ``url`` (default: the test's)."""
    url = url or STORE_URL
    if url is not None:
        import pgstore

        return pgstore.table_counts(url)
    with closing(sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                          "AND name NOT LIKE 'sqlite_%'")]
        return {n: db.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}


def sandbox_missing() -> str | None:
    """Why no bubblewrap sandbox can be made here, or None. Tests that need one skip
    for it, except in CI (``CI`` set), where they fail instead: .ci/run installs it."""
    import pytest

    from tether.daemon.toolsets.sandbox import probe

    found = probe()
    if found.ok:
        return None
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the sandbox tests ({found.why}): .ci/run installs "
                    "bubblewrap")
    return found.why
