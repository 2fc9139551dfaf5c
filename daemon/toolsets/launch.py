"""Starting a command, reading it to its end, and ending it whole.

``spawn`` starts an argv (sandbox.py builds it) in a new session, so that its
process group can be ended at once, and marks its environment with a token of
its own. ``collect`` reads its output until it ends: its exit, then its pipe
drained — bounded, because a process it left behind (``setsid cmd &``) may
hold the pipe open for ever; such leftovers are ended with it. ``end`` ends
it: SIGTERM to the group, a grace, then SIGKILL to the group and to every
process that left the group but descends from it or carries its token. In a
sandbox the group holds bwrap and the init of the command's pid namespace:
when they go, the kernel ends everything in the namespace.

asyncio's ``Process.wait()`` waits for the pipes as well as the exit; nothing
here waits on it unbounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from . import lineage

__all__ = ["spawn", "collect", "end", "exited", "marked", "kill_marked", "TOKEN_ENV",
           "KILL_GRACE_SECONDS", "DRAIN_SECONDS"]

#: the variable whose value marks every process of one command
TOKEN_ENV = "TETHER_COMMAND"
KILL_GRACE_SECONDS = 2.0
#: how long the output may go on after the command exited before what holds it is ended
DRAIN_SECONDS = 1.0

_tokens: weakref.WeakKeyDictionary[asyncio.subprocess.Process, str] = \
    weakref.WeakKeyDictionary()


async def spawn(argv: list[str], cwd: str, env: Mapping[str, str], *,
                stdin: bool = False) -> asyncio.subprocess.Process:
    """Start ``argv`` in ``cwd`` in a new session, stdout and stderr on one pipe.

    It is registered as a tool process (lineage.py) and marked in its environment,
    so what it starts cannot answer the owner's approval prompts; the caller
    unregisters it once it has ended."""
    env, token = marked(env)
    starting = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env,
        start_new_session=True,
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT))
    try:
        # not cancelled half-way: asyncio would then kill only the process it forked
        # and wait for its pipes, which what that process started (a sandbox's inner
        # init, in a session of its own) keeps open: the caller would hang, and that
        # would be left running
        proc = await asyncio.shield(starting)
    except asyncio.CancelledError:
        # the turn stops while its command starts: once started, it goes with it
        starting.add_done_callback(lambda done: _end_started(done, token))
        raise
    _tokens[proc] = token
    lineage.register(proc.pid)  # lineage: the agent's process (peers.py refuses it)
    return proc


#: ends of commands whose caller was cancelled while they started (kept referenced)
_ending: set[asyncio.Task[None]] = set()


def _end_started(starting: asyncio.Future[asyncio.subprocess.Process], token: str) -> None:
    if starting.cancelled() or starting.exception() is not None:
        return  # nothing started
    proc = starting.result()
    _tokens[proc] = token

    async def ending() -> None:
        try:
            await end(proc)
        finally:
            _release(proc)

    task = asyncio.ensure_future(ending())
    _ending.add(task)
    task.add_done_callback(_ending.discard)


def marked(env: Mapping[str, str]) -> tuple[dict[str, str], str]:
    """``env`` with a new token of one command's processes, and the marker of the
    agent's processes (lineage.MARKER); and the token."""
    token = secrets.token_hex(8)
    return {**env, TOKEN_ENV: token, lineage.MARKER: "1"}, token


def kill_marked(token: str) -> int:
    """SIGKILL every process whose environment carries ``token``: what is left of a
    command the owner did not start itself (an editor's terminal ran it). How many."""
    found = _strays(-1, token)  # no process of its own to start from: the token alone
    _kill_each(found)
    return len(found)


async def exited(proc: asyncio.subprocess.Process) -> int:
    """The exit status, as soon as the process has exited (its pipes may stay open)."""
    if proc.returncode is None:
        try:
            fd = os.pidfd_open(proc.pid)
        except (OSError, AttributeError):
            fd = None
        if fd is not None:
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[None] = loop.create_future()

            def readable() -> None:
                if not ready.done():
                    ready.set_result(None)

            loop.add_reader(fd, readable)
            try:
                if proc.returncode is None:
                    await ready
            finally:
                loop.remove_reader(fd)
                os.close(fd)
        # the exit is known to the kernel; asyncio's child watcher records it shortly
        while proc.returncode is None:
            await asyncio.sleep(0.02)
    return proc.returncode


async def collect(proc: asyncio.subprocess.Process, feed: Callable[[bytes], Any]) -> int:
    """Feed the output to ``feed`` until the command has ended; its exit status.

    Cancelled, it stops reading and leaves the process to the caller (``end``)."""
    assert proc.stdout is not None
    stdout = proc.stdout

    async def read() -> None:
        while data := await stdout.read(65536):
            feed(data)

    reader = asyncio.ensure_future(read())
    try:
        code = await exited(proc)
        done, _ = await asyncio.wait({reader}, timeout=DRAIN_SECONDS)
        if not done:
            # a process it left behind holds the pipe: it ends with the command
            await end(proc, grace=0)
            done, _ = await asyncio.wait({reader}, timeout=DRAIN_SECONDS)
            if not done:
                _release(proc)
                await asyncio.wait({reader}, timeout=DRAIN_SECONDS)
        return code
    finally:
        if not reader.done():
            reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


async def end(proc: asyncio.subprocess.Process, grace: float = KILL_GRACE_SECONDS) -> None:
    """End the command and everything it started: SIGTERM to its group, ``grace``
    seconds, then SIGKILL to the group and to what left it."""
    token = _tokens.get(proc)
    strays = _strays(proc.pid, token)  # before the kill: the tree is still whole
    if grace > 0 and proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(exited(proc), grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    _kill_each({**strays, **_strays(proc.pid, token)})
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(exited(proc), KILL_GRACE_SECONDS)


def kill_now(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the command and what left its group, without waiting (shutdown)."""
    strays = _strays(proc.pid, _tokens.get(proc))
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    _kill_each(strays)


def _release(proc: asyncio.subprocess.Process) -> None:
    """Close our ends of its pipes, so that nothing waits on them any more."""
    transport = getattr(proc, "_transport", None)  # asyncio keeps the pipes there
    if transport is not None:
        transport.close()


def _stat(pid: int) -> tuple[int, bytes] | None:
    """(parent pid, start time) of ``pid`` from /proc, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), fields[19]
    except (OSError, IndexError, ValueError):
        return None


def _kill_each(found: dict[int, bytes]) -> None:
    """SIGKILL each pid of ``found`` that is still the process found (same start
    time: a pid reused meanwhile by another process is left alone)."""
    for pid, started in found.items():
        now = _stat(pid)
        if now is not None and now[1] == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _strays(root: int, token: str | None) -> dict[int, bytes]:
    """Processes of the command outside its process group, with their start times:
    the descendants of ``root`` and every process whose environment carries ``token``."""
    needle = f"{TOKEN_ENV}={token}\0".encode() if token else None
    children: dict[int, list[int]] = {}
    started: dict[int, bytes] = {}
    marked: set[int] = set()
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        stat = _stat(pid)
        if stat is None:
            continue
        children.setdefault(stat[0], []).append(pid)
        started[pid] = stat[1]
        if needle is not None:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if needle in f.read() + b"\0":
                        marked.add(pid)
            except OSError:
                pass
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return {pid: started[pid] for pid in (found | marked) - {root, os.getpid()}}
