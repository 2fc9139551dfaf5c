"""The owner's home directory: paths, the exclusive lock, the descriptor.

Layout (SPEC §1): ``config.yaml``, ``state.db`` (+WAL), ``daemon.lock``,
``daemon.json``, ``daemon.sock``, ``logs/``. The home is created 0700; the
socket and descriptor are 0600. Whoever holds the ``flock`` on daemon.lock is
the owner; the lock dies with the process, so a crashed owner never blocks the
next one.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = ["Home", "resolve_home", "OwnerRunning", "read_descriptor"]


class OwnerRunning(Exception):
    """Another live owner holds the home's lock."""

    def __init__(self, home: Path, pid: int | None) -> None:
        who = f"pid {pid}" if pid else "another process"
        super().__init__(f"an owner is already running for {home} ({who})")
        self.pid = pid


def resolve_home(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--home, else $TETHER_HOME, else the platform's user data dir."""
    if explicit:
        return Path(explicit).expanduser().absolute()
    env = os.environ.get("TETHER_HOME")
    if env:
        return Path(env).expanduser().absolute()
    import platformdirs

    return Path(platformdirs.user_data_dir("tether", appauthor=False)).absolute()


def read_descriptor(home: Path) -> dict[str, Any] | None:
    try:
        return orjson.loads((home / "daemon.json").read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None


@dataclass
class Home:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def db(self) -> Path:
        return self.root / "state.db"

    @property
    def lock(self) -> Path:
        return self.root / "daemon.lock"

    @property
    def descriptor(self) -> Path:
        return self.root / "daemon.json"

    @property
    def socket(self) -> Path:
        return self.root / "daemon.sock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

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

    def remove_runtime_files(self) -> None:
        for path in (self.descriptor, self.socket):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
