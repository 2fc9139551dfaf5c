"""The owner process: start-up, recovery, serving, and ordered shutdown.

Start-up: lock the home (exactly one owner), open and migrate state.db, bump
the epoch, recover (started admissions of older epochs → unknown; background
delegations left running → interrupted and delivered), listen, and only then
write daemon.json — a client that sees the descriptor can connect.

The services themselves are built, started and torn down by services.py's
`build_services` (the one wiring, which the tests use too); this module holds
the process around it: the lock, the configuration, the signals, the order of
start-up and the wait for a stop. A lone owner and a fleet node differ only in
the `Placement` services.py picks (ledger/placement.py).

Shutdown (``tether stop``, SIGTERM, SIGINT, SIGHUP): stop admitting (runtime_draining),
let running turns finish within ``daemon.grace_seconds``, interrupt the rest
and record them terminal/interrupted, close connections with 1001, remove the
socket and descriptor, release the lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Mapping

from tether.store import StorageError

from .config.core import Config, load_config
from .config.store import StoreConfig, load_store_config
from .model.provider import Provider
from .runtime.home import Home
from .runtime.logfile import LogFile
from .services import build_services, tether_version
from .transport.server import tcp_address

__all__ = ["run_owner", "tether_version", "setup_logging"]

log = logging.getLogger("tether.owner")


def setup_logging(home: Home, *, foreground: bool) -> None:
    """logs/owner.log (and stderr with ``foreground``): tether's records from INFO up,
    and the warnings of the libraries the owner runs on (asyncio's unretrieved task
    errors, websockets' failed handshakes), which would otherwise reach only stderr."""
    root = logging.getLogger("tether")
    root.setLevel(logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler = LogFile(home.owner_log, max_bytes=5 * 1024 * 1024, backups=3)
    handlers: list[logging.Handler] = [handler]
    if foreground:
        handlers.append(logging.StreamHandler())
    for h in handlers:
        h.setFormatter(fmt)
        for name in ("tether", "asyncio", "websockets"):
            logging.getLogger(name).addHandler(h)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


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
            try:
                await _serve(home, config, store_config, tcp, providers or {}, ready)
            except ExceptionGroup as group:
                # a start-up failure inside the TaskGroup (a port in use, a broken
                # state.db) surfaces as itself, so `tether serve` can say what it was
                if len(group.exceptions) == 1 and isinstance(group.exceptions[0], Exception):
                    raise group.exceptions[0] from None
                raise
        except StorageError as exc:
            log.error("state database failed: %s", exc.detail)
            raise
    finally:
        home.remove_runtime_files()
        os.close(lock_fd)


async def _serve(home: Home, config: Config, store: StoreConfig, tcp: str | None,
                 overrides: Mapping[str, Provider], ready: asyncio.Event | None) -> None:
    """Start-up, serving and the ordered shutdown, on the services services.py wires."""
    loop = asyncio.get_running_loop()
    try:
        async with build_services(home, config, store, overrides=overrides) as services:
            await services.start(tcp)  # recovery, then the listeners
            for sig in STOP_SIGNALS:
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, services.supervisor.stop_requested.set)
            services.publish()  # daemon.json: clients may connect
            await services.serve()
            if ready is not None:
                ready.set()
            await services.supervisor.stop_requested.wait()
            # leaving the block is the ordered shutdown
    finally:
        for sig in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
