"""The end-to-end start-up, written once: a fake model, a config pointing at it, the
real owner on a fresh home, a peer on the transport under test, and a new session.

The `scene` fixture (tests/e2e/conftest.py) hands tests `start_scene` bound to the
run's store (the home's state.db, or a fresh PostgreSQL schema) and transport
(the Unix socket, or the TCP listener with a bearer token minted over the socket).
Both are explicit here, never read from a module global, so what a test reads
back (`Scene.rows`) is the store its owner wrote.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pgstore
from fakeprovider import FakeProvider
from harness import OwnerProcess, Peer, clean_env, write_config
from websockets.asyncio.client import connect

TRANSPORTS = ("unix", "tcp")


@dataclass(frozen=True)
class Store:
    """The store the owners of a home keep their state in, read directly as an
    inspector would (also after the owner stopped): the home's state.db, or the
    PostgreSQL schema at ``url``."""

    home: Path
    url: str | None  # None: the home's state.db

    def _sqlite(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.home / 'state.db'}?mode=ro", uri=True)

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        if self.url is not None:
            return pgstore.rows(self.url, sql, *args)
        with closing(self._sqlite()) as db:
            return db.execute(sql, args).fetchall()

    def dicts(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        """As `rows`, each row a dict by column name."""
        if self.url is not None:
            return pgstore.dicts(self.url, sql, *args)
        with closing(self._sqlite()) as db:
            db.row_factory = sqlite3.Row
            return [dict(r) for r in db.execute(sql, args)]

    def dump(self) -> bytes:
        """Everything the store holds, as bytes to search: state.db with its WAL, or
        every row of every table of the schema as text."""
        if self.url is not None:
            return pgstore.dump(self.url).encode()
        return b"".join(p.read_bytes() for p in sorted(self.home.glob("state.db*"))
                        if p.is_file())

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of an owner or a CLI on this home and store."""
        return {**owner_env(self.home, self.url), **extra}


@dataclass
class Scene:
    home: Path
    provider: FakeProvider  # (None when the scene has no model)
    owner: OwnerProcess
    peer: Peer
    #: the session created for the test (None when it asked for none)
    session_id: str | None
    store_url: str | None  # None: the home's state.db
    transport: str
    #: the bearer token the TCP peers present (None on the Unix socket)
    token: str | None = None

    async def connect(self) -> Peer:
        """Another peer, on the same transport as ``peer``."""
        if self.transport == "unix":
            return await Peer.connect(self.home)
        ws = await connect(self.owner.descriptor["tcp_url"], max_size=None,
                           additional_headers={"Authorization": f"Bearer {self.token}"})
        return Peer(ws)

    @property
    def store(self) -> Store:
        return Store(self.home, self.store_url)

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """Read the store directly, as an inspector would (also after the owner stopped)."""
        return self.store.rows(sql, *args)

    def dicts(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        """As `rows`, each row a dict by column name."""
        return self.store.dicts(sql, *args)

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a CLI run against this scene's owner."""
        return self.store.env(**extra)


def owner_env(home: Path, store_url: str | None) -> dict[str, str]:
    """The owner's environment: a clean one, keeping its state in ``store_url``."""
    env = clean_env(home)
    env.pop("TETHER_STORE", None)
    if store_url is not None:
        env["TETHER_STORE"] = store_url
    return env


def start_scene(tmp_path: Path, store_url: str | None, transport: str
                ) -> Callable[..., Any]:
    """``async with start(handler, **config) as scene``: see the module docstring.

    ``handler`` is the fake model's (None: no model configured); ``config`` adds
    config.yaml sections; ``session`` the session.create params (False: create
    none); ``args`` the owner's extra command-line arguments, ``env`` its extra
    environment variables. On exit the owner has stopped, so the store can be
    read as it was left."""
    assert transport in TRANSPORTS, transport

    @asynccontextmanager
    async def start(handler: Callable[[dict], Any] | None, *,
                    session: dict[str, Any] | bool = True, args: tuple[str, ...] = (),
                    env: dict[str, str] | None = None, home: Path | None = None,
                    **config: Any) -> AsyncIterator[Scene]:
        home = home or tmp_path / "home"
        if transport == "tcp" and "--tcp" not in args:
            args = (*args, "--tcp", "127.0.0.1:0")
        async with AsyncExitStack() as stack:
            provider = None if handler is None else stack.enter_context(FakeProvider(handler))
            write_config(home, provider and provider.url, **config)
            owner = stack.enter_context(OwnerProcess(
                home, *args, env={**owner_env(home, store_url), **(env or {})}))
            token = None
            if transport == "tcp":
                async with await Peer.connect(home) as local:
                    token = (await local.result("token.create", label="scene"))["token"]
            scene = Scene(home, provider, owner, None, None, store_url,  # type: ignore[arg-type]
                          transport, token)
            scene.peer = await stack.enter_async_context(await scene.connect())
            if session is not False:
                params = session if isinstance(session, dict) else {}
                scene.session_id = (await scene.peer.result("session.create",
                                                            **params))["session_id"]
            yield scene

    return start
