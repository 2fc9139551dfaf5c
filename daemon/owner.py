"""The owner process: start-up, recovery, serving, and ordered shutdown.

Start-up: lock the home (exactly one owner), open and migrate state.db, bump
the epoch, recover (started admissions of older epochs → unknown; background
delegations left running → interrupted and delivered), listen, and only then
write daemon.json — a client that sees the descriptor can connect.

``_serve`` is also the owner's wiring: every service is built here, once, from
the few collaborators it needs, in the order they depend on each other.

Shutdown (``tether stop``, SIGTERM, SIGINT, SIGHUP): stop admitting (runtime_draining),
let running turns finish within ``daemon.grace_seconds``, interrupt the rest
and record them terminal/interrupted, close connections with 1001, remove the
socket and descriptor, release the lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import logging.handlers
import os
import secrets
import signal
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version

import httpx

from tether.rpc.protocol import PROTOCOL
from tether.store import Database, StorageError
from tether.store import runtime as runtime_rows

from . import faults
from .admissions import AdmissionService
from .config import Config, load_config
from .delegation.background import BackgroundDelegations
from .delegation.children import ChildRunner
from .delegation.tool import delegate_task_tool
from .engine import Engine
from .events import EventBus
from .handlers import Identity, build_dispatcher, token_hash
from .home import Home
from .journal import Journal
from .provider import Provider
from .providers import Providers
from .recovery import recover
from .scheduler import Scheduler
from .server import Listeners, parse_hostport, tcp_address
from .sessions import SessionService
from .supervisor import Supervisor
from .tools import ToolRegistry
from .turns import TurnRunner

__all__ = ["run_owner", "tether_version", "setup_logging"]

log = logging.getLogger("tether.owner")


def tether_version() -> str:
    try:
        return version("tether")
    except PackageNotFoundError:
        return "0+unknown"


def setup_logging(home: Home, *, foreground: bool) -> None:
    root = logging.getLogger("tether")
    root.setLevel(logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler = logging.handlers.RotatingFileHandler(home.logs / "owner.log",
                                                   maxBytes=5 * 1024 * 1024, backupCount=3)
    handler.setFormatter(fmt)
    root.addHandler(handler)
    if foreground:
        stream = logging.StreamHandler()
        stream.setFormatter(fmt)
        root.addHandler(stream)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


async def run_owner(home: Home, *, tcp: str | None = None, config: Config | None = None,
                    providers: Mapping[str, Provider] | None = None,
                    ready: asyncio.Event | None = None) -> None:
    """Run an owner until asked to stop. Raises OwnerRunning if one already runs.

    ``providers`` replaces provider names with ready instances (the bench and
    in-process tests run turns without a model server this way)."""
    os.umask(0o077)  # state.db, logs and tokens are the user's alone
    home.ensure()
    lock_fd = home.acquire_lock()
    try:
        config = config or load_config(home.config)
        if tcp:  # a bad --tcp is refused before state.db is even opened
            tcp_address(tcp, allow_remote=config.daemon.tcp_allow_remote)
        try:
            await _serve(home, config, tcp, providers or {}, ready)
        except ExceptionGroup as group:
            # a start-up failure inside the TaskGroup (a port in use, a broken
            # state.db) surfaces as itself, so `tether serve` can say what it was
            if len(group.exceptions) == 1 and isinstance(group.exceptions[0], Exception):
                raise group.exceptions[0] from None
            raise
    finally:
        home.remove_runtime_files()
        os.close(lock_fd)


async def _serve(home: Home, config: Config, tcp: str | None,
                 overrides: Mapping[str, Provider], ready: asyncio.Event | None) -> None:
    dcfg = config.daemon
    db = await Database.open(home.db, busy_timeout_ms=dcfg.busy_timeout_ms,
                             max_bytes=dcfg.max_db_bytes, fault=faults.storage_fault())
    try:
        epoch = await db.write(runtime_rows.bump_epoch)
        scheduler = Scheduler(dcfg.max_running_turns)
        bus = EventBus()
        journal = Journal(db, bus)
        await recover(journal, epoch, scheduler, dcfg.unknown_policy)
        loop = asyncio.get_running_loop()
        async with httpx.AsyncClient() as http, asyncio.TaskGroup() as tasks:
            identity = Identity(version=tether_version(),
                                instance_id="own_" + secrets.token_hex(8), epoch=epoch)
            supervisor = Supervisor(tasks)
            tools = ToolRegistry()
            engine = Engine(Providers(config, http, overrides=overrides,
                                      config_path=home.config), tools)
            turns = TurnRunner(engine, journal, scheduler, supervisor, config, epoch=epoch)
            admissions_svc = AdmissionService(journal, scheduler, supervisor, turns, dcfg,
                                              epoch=epoch)
            sessions = SessionService(journal, bus, scheduler, supervisor)
            children = ChildRunner(engine, journal, supervisor, config)
            background = BackgroundDelegations(children, journal, supervisor, config,
                                               admissions_svc.admit, epoch=epoch)
            tools.add(delegate_task_tool(children, background, config.delegation))

            async def token_ok(token: str) -> bool:
                digest = token_hash(token)
                return await db.read(lambda c: runtime_rows.token_exists(c, digest))

            dispatcher = build_dispatcher(identity=identity, db=db, bus=bus, sessions=sessions,
                                          admissions=admissions_svc, turns=turns,
                                          supervisor=supervisor)
            listeners = Listeners(
                dispatcher, bus, max_connections=dcfg.max_connections,
                max_frame_bytes=dcfg.max_frame_bytes, viewer_queue=dcfg.viewer_queue_events,
                max_subscriptions=dcfg.max_subscriptions_per_connection, token_check=token_ok,
                allowed_origins=dcfg.tcp_allowed_origins)
            await listeners.start_unix(home.socket)
            if tcp:
                host, port = parse_hostport(tcp)
                await listeners.start_tcp(host, port, allow_remote=dcfg.tcp_allow_remote)
            for sig in STOP_SIGNALS:
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, supervisor.stop_requested.set)
            home.clear_stopped()  # an owner runs again: clients may start one once more
            home.write_descriptor({
                "protocol": PROTOCOL, "version": identity.version, "pid": os.getpid(),
                "instance_id": identity.instance_id, "epoch": epoch,
                "socket": str(home.socket), "tcp_url": listeners.tcp_url,
                "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            })
            log.info("owner %s (epoch %d, pid %d) serving %s%s", identity.instance_id, epoch,
                     os.getpid(), home.socket,
                     f" and {listeners.tcp_url}" if listeners.tcp_url else "")
            turns.pump()
            supervisor.spawn(background.recover(), "delegation-recovery")
            if ready is not None:
                ready.set()
            await supervisor.stop_requested.wait()
            home.mark_stopped(identity.instance_id)  # before any client can see us go
            log.info("draining: admitting nothing new, %d turn(s) running", len(turns.running))
            supervisor.draining = True
            await turns.stop_all(dcfg.grace_seconds)
            await background.stop_all()
            home.remove_runtime_files()
            await listeners.close()
            for sig in STOP_SIGNALS:
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
            # anything still owned by the group (late deliveries) ends now
            supervisor.cancel_spawned()
    except StorageError as exc:
        log.error("state database failed: %s", exc.detail)
        raise
    finally:
        await db.close()
        log.info("owner stopped")
