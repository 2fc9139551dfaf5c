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
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

import httpx

from tether.rpc.protocol import PROTOCOL
from tether.store import StorageError
from tether.store import runtime as runtime_rows
from tether.store import sessions as session_rows

from .approvals.handlers import approval_handlers
from .approvals.service import ApprovalService
from .config.core import Config, load_config
from .config.store import StoreConfig, load_store_config, open_store, shown_url
from .config.turn import turn_defaults
from .cron.handlers import cron_handlers
from .cron.jobs import CronJobs
from .cron.service import FLEET_SLEEP_SECONDS, CronService
from .delegation.background import BackgroundDelegations
from .delegation.children import ChildRunner
from .delegation.tool import delegate_task_tool
from .demo import demo_provider
from .engine.core import Engine
from .engine.tools import ToolRegistry
from .engine.turns import TurnRunner
from .fleet.feed import Feed
from .fleet.node import FleetNode
from .ledger.admissions import AdmissionService
from .ledger.events import EventBus
from .ledger.journal import Journal
from .ledger.recovery import recover
from .ledger.scheduler import Scheduler
from .mcp.manager import McpManager, mcp_handlers
from .model.provider import Provider
from .model.providers import Providers
from .runtime import faults
from .runtime.home import Home
from .runtime.supervisor import Supervisor
from .sessions.history import History, history_handlers
from .sessions.service import SessionService
from .toolsets.files import file_tools
from .toolsets.processes import ProcessTable
from .toolsets.sandbox import Sandbox, probe, store_credentials
from .toolsets.terminal import process_tool, terminal_tool
from .transport.handlers import Identity, build_dispatcher
from .transport.server import Listeners, tcp_address
from .transport.tcp_listener import TcpListener, register_listen_method
from .transport.tokens import TokenService, register_token_methods
from .transport.viewer import ViewerPages

if TYPE_CHECKING:
    from .http import HttpFrontend

__all__ = ["run_owner", "tether_version", "setup_logging"]

log = logging.getLogger("tether.owner")


def tether_version() -> str:
    try:
        return version("tether")
    except PackageNotFoundError:
        return "0+unknown"


def setup_logging(home: Home, *, foreground: bool) -> None:
    """logs/owner.log (and stderr with ``foreground``): tether's records from INFO up,
    and the warnings of the libraries the owner runs on (asyncio's unretrieved task
    errors, websockets' failed handshakes), which would otherwise reach only stderr."""
    root = logging.getLogger("tether")
    root.setLevel(logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler = logging.handlers.RotatingFileHandler(home.owner_log,
                                                   maxBytes=5 * 1024 * 1024, backupCount=3)
    handlers: list[logging.Handler] = [handler]
    if foreground:
        handlers.append(logging.StreamHandler())
    for h in handlers:
        h.setFormatter(fmt)
        for name in ("tether", "asyncio", "websockets"):
            logging.getLogger(name).addHandler(h)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _private_paths(home: Home) -> tuple[str, ...]:
    """What no command may read unasked: the owner's home, by the path it was named
    with and by its real one (config, state, sockets, tokens, logs)."""
    named = os.path.abspath(str(home.root))
    return tuple(dict.fromkeys((named, os.path.realpath(named))))


async def run_owner(home: Home, *, tcp: str | None = None, config: Config | None = None,
                    providers: Mapping[str, Provider] | None = None,
                    ready: asyncio.Event | None = None, store: str | None = None) -> None:
    """Run an owner until asked to stop. Raises OwnerRunning if one already runs.

    ``providers`` replaces provider names with ready instances (the bench and
    in-process tests run turns without a model server this way)."""
    os.umask(0o077)  # state.db, logs and tokens are the user's alone
    home.ensure()
    lock_fd = home.acquire_lock()
    try:
        config = config or load_config(home.config)
        store_config = load_store_config(home.config, flag=store)
        if tcp:  # a bad --tcp is refused before state.db is even opened
            tcp_address(tcp, allow_remote=config.daemon.tcp_allow_remote)
        try:
            await _serve(home, config, store_config, tcp, providers or {}, ready)
        except ExceptionGroup as group:
            # a start-up failure inside the TaskGroup (a port in use, a broken
            # state.db) surfaces as itself, so `tether serve` can say what it was
            if len(group.exceptions) == 1 and isinstance(group.exceptions[0], Exception):
                raise group.exceptions[0] from None
            raise
    finally:
        home.remove_runtime_files()
        os.close(lock_fd)


async def session_exists(db: Any, session_id: str) -> bool:
    return await db.read(lambda c: session_rows.get(c, session_id) is not None)


def _http_frontend(journal: Journal, bus: EventBus, admissions_svc: AdmissionService,
                   config: Config, tokens: TokenService, supervisor: Supervisor,
                   tools: ToolRegistry) -> HttpFrontend:
    """The HTTP endpoint served on the TCP port beside the WebSocket protocol: the
    OpenAI-compatible API and the viewer page; its bearer tokens are checked as
    the WebSocket listener checks them."""
    from .http import HttpFrontend

    return HttpFrontend(journal, bus, admissions_svc, config, tokens.check,
                        lambda: supervisor.draining, ViewerPages(tokens).answer,
                        tool_names=tools.names())


async def _serve(home: Home, config: Config, store: StoreConfig, tcp: str | None,
                 overrides: Mapping[str, Provider], ready: asyncio.Event | None) -> None:
    dcfg = config.daemon
    db = faults.wrap_storage(await open_store(home.db, dcfg, store))
    feed: Feed | None = None
    try:
        epoch = await db.write(runtime_rows.bump_epoch)
        scheduler = Scheduler(dcfg.max_running_turns)
        instance_id = "own_" + secrets.token_hex(8)
        shared = db.dialect == "postgresql"  # one node of a fleet (docs/scale-out.md)
        # on a shared store, the bus also carries other nodes' events
        feed = Feed(db, instance_id) if shared else None
        bus = feed or EventBus()
        journal = Journal(db, bus, announce=feed.announce if feed else None,
                          outage_seconds=store.outage_seconds)
        if feed:
            await feed.start()
        if not shared:  # a fleet recovers a node's work when that node dies
            await recover(journal, epoch, scheduler, dcfg.unknown_policy)
        loop = asyncio.get_running_loop()
        async with httpx.AsyncClient() as http, asyncio.TaskGroup() as tasks:
            # every command runs in the sandbox, with an allowlisted environment
            # (docs/tools.md): the owner's home, secrets and store are out of reach
            sandbox = Sandbox(config.sandbox, probe(), home=home.root,
                              hidden_files=store_credentials(store.url, os.environ),
                              secrets=(config.model.api_key, config.delegation.api_key))
            log.info("sandbox: %s", sandbox.describe())
            identity = Identity(version=tether_version(), instance_id=instance_id, epoch=epoch,
                                turn_defaults=turn_defaults(config), sandbox=sandbox.describe(),
                                sandbox_mode=config.sandbox.mode,
                                approvals_mode=config.approvals.mode)
            supervisor = Supervisor(tasks)
            fleet = FleetNode(journal, scheduler, supervisor, node_id=identity.instance_id,
                              epoch=epoch, lease_seconds=store.lease_seconds,
                              policy=dcfg.unknown_policy) if shared else None
            tools = ToolRegistry()
            approvals = ApprovalService(journal, scheduler, supervisor, config.approvals,
                                        epoch=epoch, private=_private_paths(home))
            if fleet is None:  # a fleet recovers a node's rows when the node dies
                await approvals.recover()
            engine = Engine(Providers(config, http, overrides=overrides, config_path=home.config,
                                      demo=demo_provider), tools, approvals)
            turns = TurnRunner(engine, journal, scheduler, supervisor, config, epoch=epoch,
                               journal_for=fleet.journal_for if fleet else None,
                               stop_elsewhere=fleet.stop_elsewhere if fleet else None)
            admissions_svc = AdmissionService(journal, scheduler, supervisor, turns, dcfg,
                                              epoch=epoch,
                                              place=fleet.place if fleet else None,
                                              sandbox_mode=config.sandbox.mode)
            sessions = SessionService(journal, bus, scheduler, supervisor, turns.prices,
                                      sandbox_mode=config.sandbox.mode)
            children = ChildRunner(engine, journal, supervisor, config)
            background = BackgroundDelegations(children, journal, supervisor, config,
                                               admissions_svc.admit, epoch=epoch)
            tools.add(delegate_task_tool(children, background, config.delegation))
            processes = ProcessTable(journal, supervisor, admissions_svc.admit, config.tools,
                                     sandbox, epoch=epoch)
            tools.add(terminal_tool(processes, config.tools))
            tools.add(process_tool(processes))
            for tool in file_tools(config.tools, home=str(home.root)):  # refused to them
                tools.add(tool)
            mcp = McpManager(config.mcp, env=os.environ, logs=home.logs,
                             media=home.root / "mcp-media", version=identity.version,
                             output_chars=config.tools.output_chars, sandbox=sandbox,
                             state=home.root / "mcp-state")
            tools.add_dynamic("mcp", mcp.tools)
            cron = CronService(journal, admissions_svc.admit, supervisor, config,
                               **({"max_sleep": FLEET_SLEEP_SECONDS} if fleet else {}))
            cron_jobs = CronJobs(journal, cron, config)

            tokens = TokenService(db)
            port: list[TcpListener] = []  # made once the listeners are
            dispatcher = build_dispatcher(identity=identity, db=db, bus=bus, sessions=sessions,
                                          admissions=admissions_svc, turns=turns,
                                          supervisor=supervisor, mcp=mcp.describe_all,
                                          register=[cron_handlers(cron_jobs, cron),
                                                    history_handlers(History(
                                                        journal, turns.prices, engine,
                                                        config, turns.compactor)),
                                                    approval_handlers(approvals),
                                                    mcp_handlers(mcp, partial(
                                                        session_exists, db)),
                                                    partial(register_token_methods,
                                                            tokens=tokens),
                                                    partial(register_listen_method,
                                                            listener=lambda: port[0],
                                                            draining=lambda: supervisor.draining)])
            listeners = Listeners(
                dispatcher, bus, max_connections=dcfg.max_connections,
                max_frame_bytes=dcfg.max_frame_bytes, viewer_queue=dcfg.viewer_queue_events,
                max_subscriptions=dcfg.max_subscriptions_per_connection, token_check=tokens.check,
                allowed_origins=dcfg.tcp_allowed_origins)
            tokens.on_revoke.append(listeners.drop_token)
            if fleet is not None:
                # before anything is admitted (placement needs the node's row); the
                # recovery of dead nodes' work, as a restarted owner's, comes first
                await fleet.start(tcp, str(home.root), turns.pump,
                                  [approvals.recover, background.recover, processes.recover],
                                  lambda sid, aid: turns.stop(sid, "cancelled", aid))
            await listeners.start_unix(home.socket)
            descriptor: dict[str, Any] = {}

            def listening(url: str) -> None:  # opened later (tether web): daemon.json says so
                if descriptor:
                    home.write_descriptor({**descriptor, "tcp_url": url})
                    log.info("listening on %s too, as asked (runtime.listen_tcp)", url)

            def make_api() -> HttpFrontend:
                api = _http_frontend(journal, bus, admissions_svc, config, tokens, supervisor,
                                     tools)
                tokens.on_revoke.append(api.app.drop_token)
                return api

            port.append(TcpListener(listeners, make_api, allow_remote=dcfg.tcp_allow_remote,
                                    opened=listening))
            if tcp:
                await port[0].open(tcp)
            for sig in STOP_SIGNALS:
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, supervisor.stop_requested.set)
            home.clear_stopped()  # an owner runs again: clients may start one once more
            descriptor.update({
                "protocol": PROTOCOL, "version": identity.version, "pid": os.getpid(),
                "instance_id": identity.instance_id, "epoch": epoch,
                "socket": str(home.socket), "tcp_url": listeners.tcp_url,
                "store": shown_url(store.url) if store.url else str(home.db),
                "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            })
            home.write_descriptor(descriptor)
            log.info("owner %s (epoch %d, pid %d) serving %s%s", identity.instance_id, epoch,
                     os.getpid(), home.socket,
                     f" and {listeners.tcp_url}" if listeners.tcp_url else "")
            turns.pump()
            if fleet is not None:
                await fleet.announce(listeners.tcp_url)
            else:
                supervisor.spawn(background.recover(), "delegation-recovery")
                supervisor.spawn(processes.recover(), "process-recovery")
            cron.start()
            if ready is not None:
                ready.set()
            await supervisor.stop_requested.wait()
            home.mark_stopped(identity.instance_id)  # before any client can see us go
            log.info("draining: admitting nothing new, %d turn(s) running", len(turns.running))
            supervisor.draining = True
            if fleet is not None:
                with contextlib.suppress(StorageError):
                    await fleet.drain()  # takes no new session from here on
            await cron.stop()  # fires nothing more; a fire being written still commits
            await turns.stop_all(dcfg.grace_seconds)
            await background.stop_all()
            await processes.stop_all()
            await mcp.close()
            if fleet is not None:
                with contextlib.suppress(StorageError):
                    await fleet.leave()  # its queued sessions go to the other nodes
            home.remove_runtime_files()
            tokens.close()
            # together: on Python 3.12+ closing the port waits for its HTTP connections too
            await asyncio.gather(listeners.close(), port[0].close())
            for sig in STOP_SIGNALS:
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
            # anything still owned by the group (late deliveries) ends now
            supervisor.cancel_spawned()
    except StorageError as exc:
        log.error("state database failed: %s", exc.detail)
        raise
    finally:
        if feed:
            await feed.stop()
        await db.close()
        log.info("owner stopped")
