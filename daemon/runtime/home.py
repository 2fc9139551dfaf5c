"""The owner's side of its home directory: creating it, the exclusive lock, the descriptor.

The layout and the home's resolution are the protocol's (``tether.rpc.home``),
shared with clients; this module adds what only the owner does with them. The
home is created 0700; the socket and descriptor are 0600. Whoever holds the
``flock`` on daemon.lock is the owner; the lock dies with the process, so a
crashed owner never blocks the next one.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

from tether.rpc.home import HomeLayout

__all__ = ["Home", "OwnerRunning"]


class OwnerRunning(Exception):
    """Another live owner holds the home's lock."""

    def __init__(self, home: Path, pid: int | None) -> None:
        who = f"pid {pid}" if pid else "another process"
        super().__init__(f"an owner is already running for {home} ({who})")
        self.pid = pid


class Home(HomeLayout):
    """A home's paths (``HomeLayout``) and what the owner does with them."""

    def ensure(self) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        # mkdir's mode is masked by umask and ignored for an existing dir
        os.chmod(self.root, 0o700)
        self.logs.mkdir(mode=0o700, exist_ok=True)

    def acquire_lock(self) -> int:
        """Take the exclusive lock or raise OwnerRunning naming the holder's pid."""
        fd = os.open(self.lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                pid = int((os.pread(fd, 32, 0).decode().split() or ["0"])[0]) or None
            except ValueError:
                pid = None
            os.close(fd)
            raise OwnerRunning(self.root, pid) from None
        # overwrite, then cut: the file never reads as empty to a refused second owner
        data = f"{os.getpid()}\n".encode()
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
        return fd

    def write_descriptor(self, data: dict[str, Any]) -> None:
        """Atomically (temp file + rename) write daemon.json with mode 0600."""
        fd, tmp = tempfile.mkstemp(prefix=".daemon.", suffix=".json", dir=self.root)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, orjson.dumps(data, option=orjson.OPT_INDENT_2))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.descriptor)

    def mark_stopped(self, instance_id: str) -> None:
        """Say that the owner ``instance_id`` is stopping on purpose (see HomeLayout.stopped)."""
        import time

        try:
            self.write_json(self.stopped, {"instance_id": instance_id, "pid": os.getpid(),
                                           "at": time.time()})
        except OSError:
            pass  # a full disk must not stop the stop; clients then behave as before

    def clear_stopped(self) -> None:
        try:
            self.stopped.unlink()
        except FileNotFoundError:
            pass

    def write_json(self, path: Any, data: dict[str, Any]) -> None:
        """Atomically (temp file + rename) write ``path`` with mode 0600."""
        fd, tmp = tempfile.mkstemp(prefix=".tmp.", suffix=".json", dir=self.root)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, orjson.dumps(data))
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def remove_runtime_files(self) -> None:
        for path in (self.descriptor, self.socket):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
