"""Opening a directory beneath another without ever leaving it: the kernel's ``openat2``.

``beneath(root_fd, rel)`` resolves ``rel`` under the directory ``root_fd`` and
follows a symlink only while it stays beneath. On Linux ≥ 5.6 the kernel does
it (``openat2`` with ``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS``; Python has no
binding, so the syscall is called through ctypes). Where there is none (ENOSYS:
an older kernel or another system; EPERM: a seccomp filter), a walk component
by component with ``O_NOFOLLOW`` and ``dir_fd`` does the same, reading each
symlink and walking its target in turn. Leaving the root (an absolute symlink,
or ``..`` past it) is ``Refused`` with kind ``escape``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from typing import Any

__all__ = ["OPENAT2", "MAX_LINKS", "DIR_FLAGS", "Refused", "beneath", "escape", "real_path"]

#: the syscall number of openat2: one number on every architecture (the table
#: was unified from 424 on), so x86_64 and aarch64 alike
SYS_OPENAT2 = 437
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_BENEATH = 0x08
MAX_LINKS = 40  # as the kernel's own bound (ELOOP)
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
#: intermediate directories of the fallback walk: O_PATH where there is one
_STEP = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(Exception):
    """The path may not be used: ``kind`` is ``escape``, ``link`` or ``forbidden``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


class _Openat2:
    """The openat2 syscall, or None where this kernel (or its seccomp filter) has none."""

    def __init__(self) -> None:
        self.enabled: bool | None = None if sys.platform == "linux" else False
        self._syscall: Any = None

    def available(self) -> bool:
        if self.enabled is None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                self._syscall = libc.syscall
                self._syscall.restype = ctypes.c_long
                fd = self.open(os.open("/", DIR_FLAGS), ".", DIR_FLAGS, close_dir=True)
                os.close(fd)
                self.enabled = True
            except (OSError, AttributeError):
                self.enabled = False
        return bool(self.enabled)

    def open(self, dir_fd: int, path: str, flags: int, *, close_dir: bool = False) -> int:
        how = _OpenHow(flags, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
        try:
            assert self._syscall is not None
            fd = self._syscall(ctypes.c_long(SYS_OPENAT2), ctypes.c_long(dir_fd),
                               ctypes.c_char_p(os.fsencode(path)), ctypes.byref(how),
                               ctypes.c_size_t(ctypes.sizeof(how)))
            err = ctypes.get_errno()
        finally:
            if close_dir:
                os.close(dir_fd)
        if fd < 0:
            raise OSError(err, os.strerror(err), path)
        return int(fd)


#: the process's openat2 (tests switch ``OPENAT2.enabled`` off to run the fallback walk)
OPENAT2 = _Openat2()


def escape(path: str, root: str) -> Refused:
    return Refused("escape", f"refused: {path} leads outside the working directory {root} "
                             "through a symbolic link; name the target's own path if you "
                             "mean it")


def beneath(root_fd: int, rel: str, shown: str, root: str) -> int:
    """A directory descriptor (O_RDONLY) of ``rel`` resolved beneath ``root_fd``."""
    if OPENAT2.available():
        try:
            return OPENAT2.open(root_fd, rel, DIR_FLAGS)
        except OSError as exc:
            if exc.errno == errno.EXDEV:
                raise escape(shown, root) from None
            if exc.errno not in (errno.ENOSYS, errno.EPERM):
                raise OSError(exc.errno, exc.strerror, shown) from None
            OPENAT2.enabled = False  # blocked after all: walk from now on
    return _walk(root_fd, rel, shown, root)


def _walk(root_fd: int, rel: str, shown: str, root: str) -> int:
    """``_beneath`` without openat2: one component at a time, never following a
    symlink blindly; its target is read and walked in turn, within the root."""
    stack = [os.dup(root_fd)]
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    links = 0
    try:
        while parts:
            part = parts.pop(0)
            if part == "..":
                if len(stack) == 1:
                    raise escape(shown, root)
                os.close(stack.pop())
                continue
            try:
                stack.append(os.open(part, _STEP, dir_fd=stack[-1]))
                continue
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise OSError(exc.errno, exc.strerror, shown) from None
                if not stat.S_ISLNK(os.stat(part, dir_fd=stack[-1],
                                            follow_symlinks=False).st_mode):
                    raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), shown) from None
            links += 1
            if links > MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), shown)
            target = os.readlink(part, dir_fd=stack[-1])
            if target.startswith("/"):
                raise escape(shown, root)
            parts[:0] = [p for p in target.split("/") if p not in ("", ".")]
        return os.open(".", DIR_FLAGS, dir_fd=stack[-1])
    finally:
        for fd in stack:
            os.close(fd)


def real_path(fd: int) -> str:
    """The absolute path the kernel knows for an open descriptor."""
    if sys.platform == "linux":
        path = os.readlink(f"/proc/self/fd/{fd}")
    else:  # macOS: F_GETPATH
        import fcntl

        raw = fcntl.fcntl(fd, getattr(fcntl, "F_GETPATH", 50), b"\0" * 1024)
        path = os.fsdecode(raw.split(b"\0", 1)[0])
    if not path.startswith("/") or path.endswith(" (deleted)"):
        raise OSError(errno.ENOENT, "the directory was removed", path)
    return path
