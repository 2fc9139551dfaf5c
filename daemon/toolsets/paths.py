"""Where a file tool's path lands, found without following a symlink anywhere unsafe.

A path the model names is made absolute against the session's working
directory (the *root*). Then:

- **beneath the root** (lexically): it is resolved beneath the root; a symlink
  is followed only while it stays beneath (beneath.py: ``openat2``
  ``RESOLVE_BENEATH``, or an ``O_NOFOLLOW`` walk). A symlink that leads out (an
  absolute target, or ``..`` past the root) is ``Refused`` with kind ``escape``.
- **outside the root** (the model named it, e.g. ``../x`` or ``/etc/hosts``):
  its directory is opened as named, and its last component is never followed
  (a symlink there is ``Refused`` with kind ``link``).
- **inside the owner's home** (config.yaml, state.db, tokens, the socket, logs),
  by its real location or as a hard link of one of the home's files, or in
  ``/proc`` (the file tools run in the owner: ``/proc/self/environ`` is its
  environment): ``Refused`` with kind ``forbidden``, whatever the mode or the
  answer.

Every place is handed out as an open directory descriptor plus a final name
that is not a symlink; the tools then read with ``O_NOFOLLOW`` and write by a
fresh temp file (``O_CREAT | O_EXCL | O_NOFOLLOW``, random name, 0600) renamed
over the name with ``renameat`` relative to that descriptor, so a symlink
planted at any name is never written through.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from .beneath import DIR_FLAGS, MAX_LINKS, OPENAT2, Refused, beneath, escape, real_path

__all__ = ["Place", "Refused", "locate", "open_dir", "open_read", "write_atomic",
           "OPENAT2"]


def _under(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` when it is ``root`` or beneath it (lexically)."""
    if path == root:
        return "."
    if path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1:]
    return None


@dataclass
class Place:
    """A path resolved: the open directory holding it and its name there (never a
    symlink; "" when the path is that directory itself). Close it when done."""

    dir_fd: int
    name: str
    #: the absolute path to show and to approve (the session's cwd as given, then
    #: the real path beneath it; outside it, the real path)
    shown: str
    inside: bool
    home: str | None
    #: directories still to create (beneath ``dir_fd``) before ``name``: see make_dirs
    rest: list[str] = field(default_factory=list)

    def make_dirs(self) -> None:
        """Create the missing directories (``rest``), none through a symlink."""
        for part in self.rest:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=self.dir_fd)
            fd = os.open(part, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=self.dir_fd)
            os.close(self.dir_fd)
            self.dir_fd = fd
        self.rest = []

    def close(self) -> None:
        if self.dir_fd >= 0:
            os.close(self.dir_fd)
            self.dir_fd = -1

    def __enter__(self) -> Place:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def locate(cwd: str | None, path: object, *, home: str | None,
           missing_ok: bool = False) -> Place:
    """Resolve ``path`` for a file tool (see the module docstring).

    Raises ValueError for a path that is not one, ``Refused`` for one that may
    not be used, OSError as the filesystem says (missing directories, ...).
    With ``missing_ok`` a missing directory is no error: the place is its nearest
    existing ancestor, and ``Place.make_dirs`` creates the rest (after approval)."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValueError("path must be a non-empty string")
    base = os.path.normpath(cwd or os.path.expanduser("~"))
    root_real = os.path.realpath(base)
    wanted = os.path.normpath(os.path.join(base, os.path.expanduser(path)))
    rel = _under(wanted, base)
    if rel is None and root_real != base:
        rel = _under(wanted, root_real)
    home_real = os.path.realpath(home) if home else None
    place = _inside(base, root_real, rel, wanted, missing_ok) if rel is not None \
        else _outside(wanted, missing_ok)
    place.home = home_real
    try:
        real = os.path.normpath(os.path.join(real_path(place.dir_fd), *place.rest, place.name))
        if home_real and _under(real, home_real) is not None:
            raise _forbidden(place.shown, home_real)
        if _under(real, "/proc") is not None or _same_device(place.dir_fd, "/proc"):
            raise Refused("forbidden", f"forbidden: {place.shown} is in /proc, which shows "
                                       "the owner's own process (its environment, memory "
                                       "and open files) to the file tools")
    except BaseException:
        place.close()
        raise
    return place


def _same_device(fd: int, path: str) -> bool:
    """Whether ``fd`` is on the file system mounted at ``path`` (procfs mounted elsewhere)."""
    try:
        return os.fstat(fd).st_dev == os.stat(path).st_dev
    except OSError:
        return False


def _forbidden(shown: str, home: str) -> Refused:
    return Refused("forbidden", f"forbidden: {shown} is in the owner's home ({home}: its "
                                "configuration, state, tokens and logs), which no file tool "
                                "may read or write")


def _inside(base: str, root_real: str, rel: str, wanted: str, missing_ok: bool) -> Place:
    root_fd = os.open(base, DIR_FLAGS)
    try:
        for _ in range(MAX_LINKS + 1):
            folder, name = os.path.split(rel) if rel != "." else (".", "")
            shown = os.path.join(base, rel) if rel != "." else base
            rest: list[str] = []
            try:
                dir_fd = beneath(root_fd, folder or ".", shown, base)
            except FileNotFoundError:
                if not missing_ok:
                    raise
                dir_fd, rest = _nearest(folder, partial(beneath, root_fd, shown=shown,
                                                        root=base))
            try:
                where = _under(real_path(dir_fd), root_real)
                if where is None:  # only a rename racing us could do this
                    raise escape(shown, base)
                shown = os.path.normpath(os.path.join(base, where, *rest, name))
                if rest:
                    return Place(dir_fd, name, shown, True, None, rest)
                try:
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False) if name else None
                except FileNotFoundError:
                    st = None
                if st is None or not stat.S_ISLNK(st.st_mode):
                    return Place(dir_fd, name, shown, True, None)
                target = os.readlink(name, dir_fd=dir_fd)
            except BaseException:
                os.close(dir_fd)
                raise
            os.close(dir_fd)
            # a symlink as the last component: followed while it stays beneath
            if target.startswith("/"):
                nxt = _under(os.path.normpath(target), root_real)
            else:
                nxt = os.path.normpath(os.path.join(where, target))
                nxt = None if nxt == ".." or nxt.startswith("../") else nxt
            if nxt is None:
                raise escape(wanted, base)
            rel = nxt
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), wanted)
    finally:
        os.close(root_fd)


def _nearest(folder: str, opener: Callable[[str], int]) -> tuple[int, list[str]]:
    """The nearest existing ancestor of ``folder`` (opened) and the parts below it."""
    parts = [p for p in folder.split("/") if p not in ("", ".")]
    for k in range(len(parts) - 1, -1, -1):
        with contextlib.suppress(FileNotFoundError):
            lead = "/" if folder.startswith("/") else ""
            return opener(lead + "/".join(parts[:k]) or lead or "."), parts[k:]
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), folder)


def _outside(wanted: str, missing_ok: bool) -> Place:
    folder, name = os.path.split(wanted)
    rest: list[str] = []
    try:
        dir_fd = os.open(folder or "/", DIR_FLAGS)
    except FileNotFoundError:
        if not missing_ok:
            raise
        dir_fd, rest = _nearest(folder, lambda f: os.open(f, DIR_FLAGS))
    try:
        shown = os.path.normpath(os.path.join(real_path(dir_fd), *rest, name))
        if rest:
            return Place(dir_fd, name, shown, False, None, rest)
        if name:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                target = os.readlink(name, dir_fd=dir_fd)
                raise Refused("link", f"refused: {shown} is a symbolic link (to {target}) "
                                      "outside the working directory; name its target's "
                                      "own path")
    except BaseException:
        os.close(dir_fd)
        raise
    return Place(dir_fd, name, shown, False, None)


def _home_files(home: str) -> set[tuple[int, int]]:
    """(device, inode) of the files in the owner's home (two levels): a hard link of
    one elsewhere is still one of them."""
    found: set[tuple[int, int]] = set()
    with contextlib.suppress(OSError):
        for top in os.scandir(home):
            with contextlib.suppress(OSError):
                if top.is_file(follow_symlinks=False):
                    st = top.stat(follow_symlinks=False)
                    found.add((st.st_dev, st.st_ino))
                elif top.is_dir(follow_symlinks=False):
                    for e in os.scandir(top.path):
                        if e.is_file(follow_symlinks=False):
                            st = e.stat(follow_symlinks=False)
                            found.add((st.st_dev, st.st_ino))
    return found


def _check_links(place: Place, st: os.stat_result) -> None:
    if place.home and st.st_nlink > 1 and (st.st_dev, st.st_ino) in _home_files(place.home):
        raise _forbidden(place.shown, place.home)


def open_read(place: Place) -> int:
    """A read-only descriptor of the regular file at ``place`` (never through a symlink)."""
    if not place.name:
        raise IsADirectoryError(errno.EISDIR, "is a directory", place.shown)
    fd = os.open(place.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                 dir_fd=place.dir_fd)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", place.shown)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", place.shown)
        _check_links(place, st)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir(place: Place) -> int:
    """A descriptor of the directory at ``place`` (never through a symlink)."""
    if not place.name:
        return os.dup(place.dir_fd)
    return os.open(place.name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=place.dir_fd)


def _umask() -> int:
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/self/status", encoding="ascii") as f:
            return int(next(line for line in f if line.startswith("Umask:")).split()[1], 8)
    return 0o022


def write_atomic(place: Place, data: bytes) -> bool:
    """Replace (or create) the file at ``place`` with ``data``; True if it existed.

    The temp file has a random name, is created O_EXCL|O_NOFOLLOW with mode
    0600, written, given the target's mode, fsynced, and renamed over the name
    relative to the directory descriptor: no symlink at any name is followed."""
    if not place.name:
        raise IsADirectoryError(errno.EISDIR, "is a directory", place.shown)
    try:
        st = os.stat(place.name, dir_fd=place.dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", place.shown)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", place.shown)
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(16):
        tmp = f".{place.name[:64]}.{secrets.token_hex(8)}.tether.tmp"
        try:
            fd = os.open(tmp, flags, 0o600, dir_fd=place.dir_fd)
            break
        except FileExistsError:
            continue
    else:
        raise OSError(errno.EEXIST, "could not create a temporary file", place.shown)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, place.name, src_dir_fd=place.dir_fd, dst_dir_fd=place.dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=place.dir_fd)
        raise
    with contextlib.suppress(OSError):
        os.fsync(place.dir_fd)
    return st is not None
