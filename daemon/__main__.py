"""``python -m tether.daemon``: run the owner (what `tether serve` and autostart exec)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys

from tether.rpc.home import EXIT_OWNER_RUNNING, resolve_home
from tether.store import StorageError

from .config.core import ConfigError
from .owner import run_owner, setup_logging
from .runtime.home import Home, OwnerRunning


async def _serve_detached(home: Home, tcp: str | None, store: str | None) -> None:
    """Run an owner a client started (``--detached``).

    Until the owner serves, its stderr is a pipe the starting client reads, so a
    reason to fail reaches the user even when it cannot reach the disk (a full
    one). Once it serves, the client stops reading: stderr then goes where stdout
    goes, to logs/daemon.log, for the rest of the owner's life.
    """
    serving = asyncio.Event()

    async def stderr_to_log() -> None:
        await serving.wait()
        with contextlib.suppress(OSError):  # the client may have stopped reading already
            sys.stderr.flush()
        os.dup2(sys.stdout.fileno(), sys.stderr.fileno())

    handover = asyncio.create_task(stderr_to_log())
    try:
        await run_owner(home, tcp=tcp, ready=serving, store=store)
    finally:
        handover.cancel()


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 stopped cleanly; 1 could not start (the reason on stderr);
    2 invalid configuration; 3 another owner already runs for this home (the only
    status a starting client retries on: it lost a start race)."""
    parser = argparse.ArgumentParser(prog="tether serve", description="Run the tether owner.")
    parser.add_argument("--home", help="home directory (default: $TETHER_HOME or the "
                                       "platform's user data dir)")
    parser.add_argument("--tcp", metavar="HOST:PORT",
                        help="also listen on loopback TCP (bearer token required)")
    parser.add_argument("--foreground", action="store_true",
                        help="log to stderr as well as logs/owner.log")
    parser.add_argument("--store", metavar="URL",
                        help="keep state in this postgresql:// database, as one node of a "
                             "fleet (default: store.url in config.yaml, $TETHER_STORE, else "
                             "state.db in the home)")
    # how a client starts an owner (clients/library/discovery.py): stderr is its pipe until ready
    parser.add_argument("--detached", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    home = Home(resolve_home(args.home))
    # before the first file is made: logs/owner.log is as private as state.db
    os.umask(0o077)
    try:
        home.ensure()
        setup_logging(home, foreground=args.foreground)
        if args.detached:
            asyncio.run(_serve_detached(home, args.tcp, args.store))
        else:
            asyncio.run(run_owner(home, tcp=args.tcp, store=args.store))
    except OwnerRunning as exc:
        print(f"tether: already_running: {exc}", file=sys.stderr)
        print("hint: use `tether status` to see it, `tether stop` to stop it", file=sys.stderr)
        return EXIT_OWNER_RUNNING
    except ConfigError as exc:
        print(f"tether: invalid configuration: {exc}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"tether: cannot start the owner: {exc}", file=sys.stderr)
        return 1
    except StorageError as exc:
        print(f"tether: the store is unusable ({exc.reason}): {exc.detail}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
