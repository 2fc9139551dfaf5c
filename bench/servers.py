"""The side ``tether bench`` measures: its private owner and its baseline server.

Each runs in its own process (``python -m tether.bench --serve-owner
HOME`` / ``--serve-echo SOCK``), so the measuring clients never share its GIL or
loop. The owner is a real one with default limits; only inference is replaced,
by `InstantProvider`, so every figure is the cost of tether itself. The echo
server is the same websockets library with the listeners' options and nothing
behind it: the floor the owner's round trip is divided by.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, unix_serve
from websockets.exceptions import ConnectionClosed

from tether.daemon.model.provider import Completion, DeltaCallback
from tether.daemon.transport.server import ws_options

__all__ = ["HOLD_PREFIX", "InstantProvider", "STREAM_PREFIX", "serve_echo", "serve_echo_process",
           "serve_owner"]

#: prompt text that makes InstantProvider stream this many small chunks
STREAM_PREFIX = "bench-stream "
#: prompt text that makes InstantProvider wait for the bench's release signal
HOLD_PREFIX = "bench-hold "


class InstantProvider:
    """A Provider that answers at once, offline: inference costs nothing.

    ``"bench-stream N"`` as the prompt streams N small chunks, alternating
    text and reasoning so each becomes its own event (a change of kind ends a
    coalesced delta). ``"bench-hold K"`` waits until `release` was called K
    times (SIGUSR1 to the bench owner), like a model still thinking. Anything
    else streams and answers ``ok``.
    """

    name = "bench"

    def __init__(self) -> None:
        self.released = 0
        self._changed = asyncio.Event()

    def release(self) -> None:
        self.released += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def complete(self, *, messages: list[dict], tools: list[dict] | None, model: str,
                       reasoning: str | None = None, on_delta: DeltaCallback | None = None,
                       on_reasoning: DeltaCallback | None = None,
                       extras: dict[str, Any] | None = None) -> Completion:
        last = messages[-1].get("content") if messages else None
        chunks = 1
        if isinstance(last, str) and last.startswith(STREAM_PREFIX):
            chunks = int(last[len(STREAM_PREFIX):].split()[0])
        elif isinstance(last, str) and last.startswith(HOLD_PREFIX):
            gate = int(last[len(HOLD_PREFIX):].split()[0])
            while self.released < gate:
                await self._changed.wait()
        for i in range(chunks):
            sink = on_reasoning if i % 2 else on_delta
            if sink is not None:
                await sink(f"chunk {i} ")
        return Completion(text="ok", tool_calls=[], usage={"total_tokens": 1},
                          finish_reason="stop", reasoning=None, model=model)


#: where the bench's owner writes its round trips to PostgreSQL when sent SIGUSR2
ROUND_TRIPS_FILE = "bench-round-trips"


def serve_owner(home_dir: str) -> int:
    """The bench's private owner: default limits, the demo provider replaced."""
    from tether.daemon.config.core import Config
    from tether.daemon.owner import run_owner, setup_logging
    from tether.daemon.runtime.home import Home, OwnerRunning

    home = Home(Path(home_dir))
    home.ensure()
    setup_logging(home, foreground=False)
    provider = InstantProvider()

    def count_round_trips() -> None:
        # SIGUSR2: the bench asks how many round trips to PostgreSQL were made so far
        from tether.store.pg import round_trips

        tmp = home.root / f"{ROUND_TRIPS_FILE}.tmp"
        tmp.write_text(str(round_trips()))
        tmp.replace(home.root / ROUND_TRIPS_FILE)  # whole, or not yet there

    async def serve() -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, provider.release)
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, count_round_trips)
        # the default provider name is "demo": the override makes every turn instant
        await run_owner(home, config=Config(), providers={"demo": provider})

    try:
        asyncio.run(serve())
    except OwnerRunning as exc:
        print(f"{exc}; give the bench a home of its own", file=sys.stderr)
        return 3
    return 0


async def serve_echo(path: Path, max_frame_bytes: int = 4 * 1024 * 1024) -> Server:
    """A bare websockets echo server on a Unix socket, with the listeners' options.

    The baseline ``tether bench`` divides the ping round trip by: what the same
    library costs per round trip with no dispatcher, store or fan-out behind it.
    """
    async def echo(conn: ServerConnection) -> None:
        try:
            async for frame in conn:
                await conn.send(frame)
        except ConnectionClosed:
            pass

    return await unix_serve(echo, str(path), **ws_options(max_frame_bytes))


def serve_echo_process(path: str) -> int:
    """The echo baseline as a process: serve until SIGTERM."""
    async def run() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        server = await serve_echo(Path(path))
        await stop.wait()
        server.close()

    asyncio.run(run())
    return 0
