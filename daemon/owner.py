"""The owner process: start-up, recovery, serving, and ordered shutdown.

Start-up: lock the home (exactly one owner), open and migrate state.db, bump
the epoch, recover (started admissions of older epochs → unknown; background
delegations left running → interrupted and delivered), listen, and only then
write daemon.json — a client that sees the descriptor can connect.

Shutdown (``tether stop``, SIGTERM, SIGINT): stop admitting (runtime_draining),
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
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import httpx
import orjson

from tether.rpc.methods import PROTOCOL
from tether.store import Database, StorageError, admissions
from tether.store import runtime as runtime_rows

from . import faults
from .admissions import AdmissionService
from .config import Config, load_config
from .delegation import DelegationService
from .events import EventBus, Journal, Tx
from .handlers import Services, build_dispatcher, token_hash
from .home import Home
from .runtime import Runtime
from .scheduler import Scheduler
from .server import Listeners, parse_hostport, tcp_address
from .sessions import SessionService
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


#: result error of an unknown admission settled by ``daemon.unknown_policy: interrupt``
POLICY_INTERRUPTED = ("the owner stopped while this turn ran; interrupted by "
                      "daemon.unknown_policy")


async def _recover(journal: Journal, epoch: int, scheduler: Scheduler, policy: str) -> None:
    """Put the ledger back into the scheduler after a restart (SPEC §7, docs/recovery.md)."""
    db = journal.db
    unknown = await db.write(lambda c: admissions.mark_unknown_before(c, epoch))
    if unknown:
        log.warning("%d admission(s) were running when the previous owner stopped; "
                    "now unknown: %s", len(unknown), ", ".join(unknown))
    rows = await db.read(admissions.all_open)
    for row in rows:
        sid, aid = row["target_session_id"], row["admission_id"]
        if row["status"] == "queued":
            scheduler.enqueue(sid, aid)
        elif row["status"] == "unknown" and policy == "manual":
            scheduler.block(sid, aid)
    if policy == "interrupt":
        body = orjson.dumps({"text": "", "usage": {}, "error": POLICY_INTERRUPTED}).decode()

        def settle(tx: Tx) -> None:
            # as prompt.resolve_unknown would: terminal, and announced to viewers
            for row in rows:
                sid, aid = row["target_session_id"], row["admission_id"]
                if row["status"] == "unknown" and admissions.finish(
                        tx.conn, aid, "interrupted", body, tx.now):
                    tx.event(sid, "message.complete",
                             {"admission_id": aid, "outcome": "interrupted", "text": "",
                              "error": POLICY_INTERRUPTED}, aid)
                    tx.event(sid, "session.info",
                             {"pending": scheduler.queued(sid), "running": None})

        await journal.write(settle)


async def run_owner(home: Home, *, tcp: str | None = None, config: Config | None = None,
                    providers: dict[str, Any] | None = None,
                    ready: asyncio.Event | None = None) -> None:
    """Run an owner until asked to stop. Raises OwnerRunning if one already runs."""
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


async def _serve(home: Home, config: Config, tcp: str | None, providers: dict[str, Any],
                 ready: asyncio.Event | None) -> None:
    dcfg = config.daemon
    db = faults.wrap_storage(await Database.open(home.db, busy_timeout_ms=dcfg.busy_timeout_ms,
                                                 max_bytes=dcfg.max_db_bytes))
    try:
        epoch = await db.write(runtime_rows.bump_epoch)
        scheduler = Scheduler(dcfg.max_running_turns)
        bus = EventBus()
        journal = Journal(db, bus)
        await _recover(journal, epoch, scheduler, dcfg.unknown_policy)
        loop = asyncio.get_running_loop()
        async with httpx.AsyncClient() as http, asyncio.TaskGroup() as tasks:
            rt = Runtime(home=home, config=config, db=db, bus=bus, journal=journal,
                         scheduler=scheduler, http=http, epoch=epoch,
                         instance_id="own_" + secrets.token_hex(8), version=tether_version(),
                         tasks=tasks, providers=providers)
            svc = Services(rt=rt, sessions=SessionService(rt), admissions=None,  # type: ignore[arg-type]
                           turns=None)  # type: ignore[arg-type]
            svc.turns = TurnRunner(rt, svc)
            svc.admissions = AdmissionService(rt, svc.turns)
            svc.delegations = DelegationService(svc)

            async def token_ok(token: str) -> bool:
                digest = token_hash(token)
                return await db.read(lambda c: runtime_rows.token_exists(c, digest))

            listeners = Listeners(
                build_dispatcher(svc), bus, max_connections=dcfg.max_connections,
                max_frame_bytes=dcfg.max_frame_bytes, viewer_queue=dcfg.viewer_queue_events,
                max_subscriptions=dcfg.max_subscriptions_per_connection, token_check=token_ok,
                allowed_origins=dcfg.tcp_allowed_origins)
            await listeners.start_unix(home.socket)
            if tcp:
                host, port = parse_hostport(tcp)
                await listeners.start_tcp(host, port, allow_remote=dcfg.tcp_allow_remote)
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, rt.stop_requested.set)
            home.write_descriptor({
                "protocol": PROTOCOL, "version": rt.version, "pid": os.getpid(),
                "instance_id": rt.instance_id, "epoch": epoch, "socket": str(home.socket),
                "tcp_url": listeners.tcp_url,
                "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            })
            log.info("owner %s (epoch %d, pid %d) serving %s%s", rt.instance_id, epoch,
                     os.getpid(), home.socket,
                     f" and {listeners.tcp_url}" if listeners.tcp_url else "")
            svc.turns.pump()
            rt.spawn(svc.delegations.recover(), "delegation-recovery")
            if ready is not None:
                ready.set()
            await rt.stop_requested.wait()
            log.info("draining: admitting nothing new, %d turn(s) running",
                     len(svc.turns.running))
            rt.draining = True
            await svc.turns.stop_all(dcfg.grace_seconds)
            await svc.delegations.stop_all()
            home.remove_runtime_files()
            await listeners.close()
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
            # anything still owned by the group (late deliveries) ends now
            rt.cancel_spawned()
    except StorageError as exc:
        log.error("state database failed: %s", exc.detail)
        raise
    finally:
        await db.close()
        log.info("owner stopped")
