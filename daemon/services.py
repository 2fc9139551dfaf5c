"""The owner's wiring: every service built once, from the few collaborators it needs.

`build_services` is the one place the owner's services are made, in the order
they depend on each other; owner.py runs it, and so does the tests' in-process
wiring (tests/wiring.py), so a test drives the services the product runs. It
opens and migrates the store, bumps the epoch and picks the `Placement`: a lone
owner on the home's state.db (`SingleOwner`), or one node of a fleet on a
shared PostgreSQL (`FleetNode`, whose bus is the `Feed` of every node's events).
Nothing else in the daemon asks which of the two it is.

Building starts nothing. The owner then calls, in this order:

- `Services.start`: recovery, before anything is served (the placement recovers
  what earlier owners or dead nodes left), then the Unix socket and, if asked,
  the TCP listener;
- `Services.publish`: daemon.json, so a client that sees it can connect;
- `Services.serve`: turns start, the placement is told the owner serves (a lone
  owner delivers what its predecessor owed; a node announces its address), cron runs.

Leaving the context normally is the ordered shutdown (`Services.stop`): admit
nothing new, let running turns finish within ``daemon.grace_seconds``, end the
late work, hand leases back, close the listeners; then the store closes. A
start-up failure leaves without it: the task group ends what had begun.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

import httpx

from tether.rpc.protocol import PROTOCOL
from tether.store import StorageError
from tether.store.tables import runtime as runtime_rows
from tether.store.tables import sessions as session_rows

from .approvals.handlers import approval_handlers
from .approvals.service import ApprovalService
from .config.core import Config
from .config.store import StoreConfig, open_store, shown_url
from .config.turn import turn_defaults
from .cron.handlers import cron_handlers
from .cron.jobs import CronJobs
from .cron.service import CronService
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
from .ledger.placement import Placement, SingleOwner
from .ledger.scheduler import Scheduler
from .mcp.manager import McpManager, mcp_handlers
from .model.provider import Provider
from .model.providers import Providers
from .model.transport import model_client
from .runtime.home import Home
from .runtime.supervisor import Supervisor
from .sessions.history import History, history_handlers
from .sessions.service import SessionService
from .toolsets.editor import EditorFiles
from .toolsets.editor_terminal import EditorTerminals
from .toolsets.files import file_tools
from .toolsets.processes import ProcessTable
from .toolsets.sandbox import Sandbox, probe, store_credentials
from .toolsets.terminal import process_tool, terminal_tool
from .transport.fs import fs_handlers
from .transport.handlers import Identity, build_dispatcher
from .transport.server import Listeners
from .transport.tcp_listener import TcpListener, register_listen_method
from .transport.tokens import TokenService, register_token_methods
from .transport.viewer import ViewerPages

if TYPE_CHECKING:
    from .http import HttpFrontend

__all__ = ["Services", "build_services", "tether_version"]

log = logging.getLogger("tether.owner")


def tether_version() -> str:
    try:
        return version("tether")
    except PackageNotFoundError:
        return "0+unknown"


def _private_paths(home: Home) -> tuple[str, ...]:
    """What no command may read unasked: the owner's home, by the path it was named
    with and by its real one (config, state, sockets, tokens, logs)."""
    named = os.path.abspath(str(home.root))
    return tuple(dict.fromkeys((named, os.path.realpath(named))))


async def session_exists(db: Any, session_id: str) -> bool:
    return await db.read(lambda c: session_rows.get(c, session_id) is not None)


@dataclass(eq=False)
class Services:
    """One owner's services (see the module docstring)."""

    home: Home
    config: Config
    store: StoreConfig
    db: Any
    epoch: int
    identity: Identity
    bus: EventBus
    journal: Journal
    scheduler: Scheduler
    supervisor: Supervisor
    placement: Placement
    sandbox: Sandbox
    tools: ToolRegistry
    approvals: ApprovalService
    engine: Engine
    turns: TurnRunner
    admissions: AdmissionService
    sessions: SessionService
    children: ChildRunner
    background: BackgroundDelegations
    processes: ProcessTable
    mcp: McpManager
    cron: CronService
    cron_jobs: CronJobs
    tokens: TokenService
    listeners: Listeners
    port: TcpListener
    #: daemon.json's content once published (empty before)
    descriptor: dict[str, Any] = field(default_factory=dict)

    async def start(self, tcp: str | None) -> None:
        """Recover (before anything is served), then listen."""
        # before anything is admitted (a fleet's placement needs the node's row); the
        # recovery of what earlier owners (or dead nodes) left comes first
        await self.placement.start(tcp, str(self.home.root), self.turns.pump,
                                   lambda sid, aid: self.turns.stop(sid, "cancelled", aid),
                                   settle=[self.approvals.recover],
                                   deliver={"delegation": self.background.recover,
                                            "process": self.processes.recover})
        await self.listeners.start_unix(self.home.socket)
        if tcp:
            await self.port.open(tcp)

    def publish(self) -> None:
        """Write daemon.json: from here a client may connect."""
        home = self.home
        home.clear_stopped()  # an owner runs again: clients may start one once more
        self.descriptor.update({
            "protocol": PROTOCOL, "version": self.identity.version, "pid": os.getpid(),
            "instance_id": self.identity.instance_id, "epoch": self.epoch,
            "socket": str(home.socket), "tcp_url": self.listeners.tcp_url,
            "store": shown_url(self.store.url) if self.store.url else str(home.db),
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        })
        home.write_descriptor(self.descriptor)
        log.info("owner %s (epoch %d, pid %d) serving %s%s", self.identity.instance_id,
                 self.epoch, os.getpid(), home.socket,
                 f" and {self.listeners.tcp_url}" if self.listeners.tcp_url else "")

    async def serve(self) -> None:
        """Begin the work: queued turns, what the placement does once serving, cron."""
        self.turns.pump()
        await self.placement.serving(self.listeners.tcp_url)
        self.cron.start()

    def _listening(self, url: str) -> None:
        """The TCP listener opened later (tether web): daemon.json says so."""
        if self.descriptor:
            self.home.write_descriptor({**self.descriptor, "tcp_url": url})
            log.info("listening on %s too, as asked (runtime.listen_tcp)", url)

    def _http_frontend(self) -> HttpFrontend:
        """The HTTP endpoint served on the TCP port beside the WebSocket protocol: the
        OpenAI-compatible API and the viewer page; its bearer tokens are checked as
        the WebSocket listener checks them."""
        from .http import HttpFrontend

        api = HttpFrontend(self.journal, self.bus, self.admissions, self.config,
                           self.tokens.check, lambda: self.supervisor.draining,
                           ViewerPages(self.tokens).answer, tool_names=self.tools.names())
        self.tokens.on_revoke.append(api.app.drop_token)
        return api

    async def stop(self) -> None:
        """The ordered shutdown (see the module docstring)."""
        home, supervisor = self.home, self.supervisor
        home.mark_stopped(self.identity.instance_id)  # before any client can see us go
        log.info("draining: admitting nothing new, %d turn(s) running", len(self.turns.running))
        supervisor.draining = True
        with contextlib.suppress(StorageError):
            await self.placement.drain()  # a node takes no new session from here on
        await self.cron.stop()  # fires nothing more; a fire being written still commits
        await self.turns.stop_all(self.config.daemon.grace_seconds)
        await self.background.stop_all()
        await self.processes.stop_all()
        await self.mcp.close()
        with contextlib.suppress(StorageError):
            await self.placement.leave()  # a node's queued sessions go to the other nodes
        home.remove_runtime_files()
        self.tokens.close()
        # together: on Python 3.12+ closing the port waits for its HTTP connections too
        await asyncio.gather(self.listeners.close(), self.port.close())


@contextlib.asynccontextmanager
async def build_services(home: Home, config: Config, store: StoreConfig, *,
                         overrides: Mapping[str, Provider] | None = None,
                         ) -> AsyncIterator[Services]:
    """The owner's services on the store ``store`` names (see the module docstring).
    ``overrides`` replaces provider names with ready instances (the bench and
    in-process tests run turns without a model server this way)."""
    dcfg = config.daemon
    db = await open_store(home.db, dcfg, store)
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
        async with model_client() as http, asyncio.TaskGroup() as tasks:
            supervisor = Supervisor(tasks)
            placement: Placement = FleetNode(
                journal, scheduler, supervisor, node_id=instance_id, epoch=epoch,
                lease_seconds=store.lease_seconds, policy=dcfg.unknown_policy) if shared \
                else SingleOwner(journal, scheduler, supervisor, epoch=epoch,
                                 policy=dcfg.unknown_policy)
            services = _wire(home, config, store, db, epoch, instance_id, bus, journal,
                             scheduler, supervisor, placement, http, overrides or {})
            yield services
            await services.stop()
            # anything still owned by the group (late deliveries) ends now
            supervisor.cancel_spawned()
    finally:
        if feed:
            await feed.stop()
        await db.close()
        log.info("owner stopped")


def _wire(home: Home, config: Config, store: StoreConfig, db: Any, epoch: int,
          instance_id: str, bus: EventBus, journal: Journal, scheduler: Scheduler,
          supervisor: Supervisor, placement: Placement, http: httpx.AsyncClient,
          overrides: Mapping[str, Provider]) -> Services:
    """Every service from its collaborators, in the order they depend on each other."""
    dcfg = config.daemon
    # every command runs in the sandbox, with an allowlisted environment
    # (docs/tools.md): the owner's home, secrets and store are out of reach
    sandbox = Sandbox(config.sandbox, probe(), home=home.root,
                      hidden_files=store_credentials(store.url, os.environ),
                      secrets=(config.model.api_key, config.delegation.api_key))
    log.info("sandbox: %s", sandbox.describe())
    identity = Identity(version=tether_version(), instance_id=instance_id, epoch=epoch,
                        turn_defaults=turn_defaults(config), sandbox=sandbox.describe(),
                        sandbox_mode=config.sandbox.mode, approvals_mode=config.approvals.mode)
    tools = ToolRegistry()
    approvals = ApprovalService(journal, scheduler, supervisor, config.approvals,
                                epoch=epoch, private=_private_paths(home))
    engine = Engine(Providers(config, http, overrides=overrides, config_path=home.config,
                              demo=demo_provider), tools, approvals)
    turns = TurnRunner(engine, journal, scheduler, supervisor, config, placement, epoch=epoch)
    admissions = AdmissionService(journal, scheduler, supervisor, turns, dcfg, placement,
                                  epoch=epoch, sandbox_mode=config.sandbox.mode)
    sessions = SessionService(journal, bus, scheduler, supervisor, turns.prices,
                              sandbox_mode=config.sandbox.mode)
    children = ChildRunner(engine, journal, supervisor, config)
    background = BackgroundDelegations(children, journal, supervisor, config,
                                       admissions.admit, epoch=epoch)
    tools.add(delegate_task_tool(children, background, config.delegation))
    processes = ProcessTable(journal, supervisor, admissions.admit, config.tools,
                             sandbox, epoch=epoch)
    # an editor's adapter executes file reads and writes (fs.offer) and sandboxed
    # commands (terminal.offer) of the sessions it opened
    editor = EditorFiles(config.tools.editor_fs_timeout_seconds)
    terminals = EditorTerminals(config.tools.editor_fs_timeout_seconds)
    tools.add(terminal_tool(processes, config.tools, terminals))
    tools.add(process_tool(processes))
    for tool in file_tools(config.tools, home=str(home.root), editor=editor):  # home refused
        tools.add(tool)
    mcp = McpManager(config.mcp, env=os.environ, logs=home.logs,
                     media=home.root / "mcp-media", version=identity.version,
                     output_chars=config.tools.output_chars, sandbox=sandbox,
                     state=home.root / "mcp-state")
    tools.add_dynamic("mcp", mcp.tools)
    cron = CronService(journal, admissions.admit, supervisor, config, placement)
    cron_jobs = CronJobs(journal, cron, config)

    tokens = TokenService(db)
    port: list[TcpListener] = []  # made once the listeners are
    dispatcher = build_dispatcher(
        identity=identity, db=db, bus=bus, sessions=sessions, admissions=admissions,
        turns=turns, supervisor=supervisor, mcp=mcp.describe_all,
        register=[cron_handlers(cron_jobs, cron),
                  history_handlers(History(journal, turns.prices, engine, config,
                                           turns.compactor)),
                  approval_handlers(approvals),
                  mcp_handlers(mcp, partial(session_exists, db)),
                  fs_handlers(editor, terminals, partial(session_exists, db)),
                  partial(register_token_methods, tokens=tokens),
                  partial(register_listen_method, listener=lambda: port[0],
                          draining=lambda: supervisor.draining)])
    listeners = Listeners(
        dispatcher, bus, max_connections=dcfg.max_connections,
        max_frame_bytes=dcfg.max_frame_bytes, viewer_queue=dcfg.viewer_queue_events,
        max_subscriptions=dcfg.max_subscriptions_per_connection, token_check=tokens.check,
        allowed_origins=dcfg.tcp_allowed_origins)
    tokens.on_revoke.append(listeners.drop_token)
    services = Services(home, config, store, db, epoch, identity, bus, journal, scheduler,
                        supervisor, placement, sandbox, tools, approvals, engine, turns,
                        admissions, sessions, children, background, processes, mcp, cron,
                        cron_jobs, tokens, listeners,
                        TcpListener(listeners, lambda: services._http_frontend(),
                                    allow_remote=dcfg.tcp_allow_remote,
                                    opened=lambda url: services._listening(url)))
    port.append(services.port)
    return services
