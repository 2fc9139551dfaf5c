"""A group's units on the event loop, waiting for PostgreSQL without blocking it.

Units run on the loop because they touch the owner's in-memory state (the
scheduler's queue, the events they announce), and they are plain functions:
``unit(tx)`` reads an answer as ``cur.fetchone()``, on SQLite and PostgreSQL
alike. On PostgreSQL such a read is a round trip, and psycopg's own wait
blocks the thread it runs on, which here is the loop's.

`on_loop` runs a group's units in a greenlet instead. Where psycopg would
block on the writer's socket (`LoopConnection.wait`), the greenlet switches
back to the loop, which watches the socket (``add_reader``/``add_writer``)
and switches back in once it is ready. Meanwhile the loop serves everything
else: frames, other sessions' turns, timers. A socket that is ready at once
(sending a small statement, an answer already there) is polled and never
costs a switch.

What a unit may rely on changes in one way: other loop callbacks can run
while it waits for an answer. docs/scale-out.md lists the rule the units
keep (in-memory state is read and changed after a unit's last wait, or read
again after it).

Outside a group's greenlet (COMMIT on the writer's thread, connecting,
settling a lost COMMIT) the connection waits as psycopg's does. The group's
BEGIN, sent on the loop just before the greenlet starts, reads nothing: it
and the request for the transaction's id go out on a connection the last
COMMIT left with nothing in flight.
"""

from __future__ import annotations

import asyncio
import contextvars
import select
from collections.abc import Callable
from typing import Any

import greenlet
import psycopg
from psycopg.waiting import Ready, Wait

__all__ = ["LoopConnection", "on_loop"]


class _Group(greenlet.greenlet):
    """One group's units, switched out while the writer's socket is not ready."""

    def __init__(self, body: Callable[[], None], done: Callable[[BaseException | None], None],
                 loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(body)
        # the units see the context vars of the callback that runs the group, as
        # they would without a greenlet (a new greenlet starts with an empty context)
        self.gr_context = contextvars.copy_context()
        self._done = done
        self._loop = loop
        self._fd = -1
        self._poll = select.poll()

    def resume(self, *ready: Any) -> None:
        """Switch into the group (on the loop); when it asks to wait, watch the socket."""
        try:
            asked = self.switch(*ready)
        except BaseException as exc:  # noqa: BLE001 - the group's failure is its caller's
            self._done(exc)
            return
        if self.dead:
            self._done(None)
            return
        fd, wait = asked
        self._fd = fd
        if wait & Wait.R:
            self._loop.add_reader(fd, self._ready, Ready.R)
        if wait & Wait.W:
            self._loop.add_writer(fd, self._ready, Ready.W)

    def _ready(self, ready: Ready) -> None:
        self._loop.remove_reader(self._fd)
        self._loop.remove_writer(self._fd)
        self.resume(ready)

    def drive(self, gen: Any, fd: int) -> Any:
        """Consume psycopg's generator ``gen`` (in the group): poll the socket, and
        give the loop back only when it is not ready."""
        poll = self._poll
        try:
            wait = next(gen)
        except StopIteration as stop:  # nothing to wait for
            return stop.value
        mask = _POLL_OF[wait]
        poll.register(fd, mask)
        try:
            while True:
                got = poll.poll(0)
                if got:
                    ready = _READY_OF.get(got[0][1]) or _ready_of(got[0][1])
                else:
                    assert self.parent is not None
                    ready = self.parent.switch((fd, wait))
                wait = gen.send(ready)
                if _POLL_OF[wait] != mask:
                    mask = _POLL_OF[wait]
                    poll.modify(fd, mask)
        except StopIteration as stop:
            return stop.value
        finally:
            poll.unregister(fd)


_POLL_OF = {Wait.R: select.POLLIN, Wait.W: select.POLLOUT,
            Wait.RW: select.POLLIN | select.POLLOUT}


def _ready_of(events: int) -> Ready:
    # an error or hang-up reads as readable: psycopg then reads the failure itself
    readable = events & (select.POLLIN | select.POLLERR | select.POLLHUP)
    writable = events & select.POLLOUT
    if readable and writable:
        return Ready.RW
    return Ready.R if readable else Ready.W


#: poll's answers as psycopg's Ready, for the ones a healthy socket gives
_READY_OF = {e: _ready_of(e) for e in (select.POLLIN, select.POLLOUT,
                                       select.POLLIN | select.POLLOUT)}


def on_loop(body: Callable[[], None], done: Callable[[BaseException | None], None]) -> None:
    """Run ``body`` (a group's units, called from a loop callback) in a greenlet of its
    own; ``done(None)`` or ``done(error)`` on the loop when it has ended."""
    _Group(body, done, asyncio.get_running_loop()).resume()


class LoopConnection(psycopg.Connection[Any]):
    """The writer's connection: inside a group's greenlet a wait for the server gives
    the loop back (`_Group.drive`); anywhere else it waits as psycopg's does. A wait
    with a timeout of its own (psycopg's notifies and cancel, used by no unit)
    waits as psycopg's does too."""

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        here = greenlet.getcurrent()
        if timeout is not None or not isinstance(here, _Group):
            return super().wait(gen, interval, timeout)
        return here.drive(gen, self.pgconn.socket)
