"""The operating-system boundary around the agent's commands: bubblewrap, on Linux.

``probe`` finds out once (cached per ``PATH``) whether a sandbox can be made:
``bwrap`` is on ``PATH`` and a trivial sandboxed ``true`` succeeds (it fails
where user namespaces are off, in some containers, and on every non-Linux
system). ``Sandbox`` turns one command into the argv that runs it:

- inside (``workspace-write`` or ``read-only``): the whole filesystem bound
  read-only; a fresh ``/dev``; a ``/proc`` of a new pid namespace (the owner's
  processes, and their environments, are not there); new ipc and uts
  namespaces; a new network namespace (nothing but an unplugged loopback)
  unless ``sandbox.network``; a private, empty ``/tmp`` (and ``/run``, where
  daemons keep their sockets, when the network is off); the session's cwd
  bound read-write (``workspace-write``) or read-only; the owner's home
  (config.yaml, state.db, daemon.sock, logs) and the credential files of
  ``store.url`` covered, even when they lie inside the cwd; every capability
  dropped; ``--new-session`` (no ``TIOCSTI`` into a terminal) and
  ``--die-with-parent`` (nothing outlives the owner);
- for an MCP stdio server (``server_argv``): the same, but the network shared
  (unless the server's ``network: false``), nothing of the workspace writable,
  and a directory of the server's own (``<home>/mcp-state/NAME``, its HOME)
  bound read-write over the covered home;
- outside (``none``: ``sandbox.mode: off``, no sandbox could be made, or an
  approved escalation): ``/bin/sh -c`` as the owner's user;
- for an editor's terminal (``editor_argv``): the same sandbox as a command's,
  with everything the owner gives its own commands besides the argv put into it:
  the environment set inside (``--clearenv``, ``--setenv``) and stdin closed.

Either way the environment is the allowlist of env.py. Killing the process
group of ``bwrap`` ends the pid namespace, so every descendant of a sandboxed
command goes with it (processes.py).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from ..config.core import SANDBOX_MODES, SandboxConfig
from .env import command_env

__all__ = ["Probe", "Sandbox", "probe", "describe", "clamp", "is_looser", "store_credentials",
           "refusal", "NONE"]

#: the boundary of a command run without a sandbox (as approvals' Request names it)
NONE = "none"
_PROBE_TIMEOUT = 10.0


@dataclass(frozen=True)
class Probe:
    """What the probe found: a working bwrap (``version``) or why there is none."""

    bwrap: str | None  # the executable's path, None when no sandbox can be made
    version: str | None = None  # "bubblewrap 0.8.0"
    why: str | None = None  # why no sandbox can be made

    @property
    def ok(self) -> bool:
        return self.bwrap is not None


def probe(path: str | None = None) -> Probe:
    """Whether a sandbox can be made with ``PATH`` ``path`` (default: the owner's)."""
    return _probe(os.environ.get("PATH", os.defpath) if path is None else path)


@functools.cache
def _probe(path: str) -> Probe:
    import sys

    if not sys.platform.startswith("linux"):
        return Probe(None, why=f"no sandbox on {sys.platform} yet (bubblewrap is Linux only)")
    bwrap = shutil.which("bwrap", path=path)
    if bwrap is None:
        return Probe(None, why="bwrap not found")
    try:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True,
                                 timeout=_PROBE_TIMEOUT).stdout.strip() or "bubblewrap"
        trial = subprocess.run([bwrap, *_BASE, "--unshare-net", "--", "true"],
                               capture_output=True, text=True, timeout=_PROBE_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as exc:
        return Probe(None, why=f"{bwrap} could not run: {exc}")
    if trial.returncode != 0:
        said = " ".join(trial.stderr.split())[:200] or f"exit {trial.returncode}"
        return Probe(None, why=f"{bwrap} cannot make a sandbox here ({said}); user "
                               "namespaces may be disabled")
    return Probe(bwrap, version=version)


#: what every sandbox has, whatever its mode
_BASE = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
         "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session",
         "--cap-drop", "ALL")


def describe(config: SandboxConfig, found: Probe) -> str:
    """One line naming the boundary commands run in under ``config`` where the probe
    found ``found``: "bubblewrap 0.8.0, workspace-write, network off", or "none — why"."""
    if config.mode == "off":
        why = "sandbox.mode is off"
    elif not found.ok:
        why = found.why or "no sandbox can be made"
    else:
        return f"{found.version}, {config.mode}, network {'on' if config.network else 'off'}"
    return f"none — {why}; commands run as the owner's user and the approval policy fails " \
           "closed"


def is_looser(requested: str, configured: str) -> bool:
    """Whether the mode ``requested`` by a turn is looser than the configured one."""
    return SANDBOX_MODES.index(requested) < SANDBOX_MODES.index(configured)


def clamp(configured: str, requested: str | None) -> str:
    """The mode a turn runs with: what it asked for, never looser than the configuration."""
    if requested is None or requested not in SANDBOX_MODES or is_looser(requested, configured):
        return configured
    return requested


def store_credentials(url: str | None, environ: Mapping[str, str]) -> list[str]:
    """Files that hold ``store.url``'s credentials: its passfile (``passfile=``,
    ``PGPASSFILE`` or ``~/.pgpass``) and its client key (``sslkey=``, ``PGSSLKEY`` or
    ``~/.postgresql/postgresql.key``), whether the URL names them or libpq's defaults do."""
    home = environ.get("HOME") or os.path.expanduser("~")
    files = [environ.get("PGPASSFILE") or os.path.join(home, ".pgpass"),
             environ.get("PGSSLKEY") or os.path.join(home, ".postgresql", "postgresql.key")]
    if url:
        query = parse_qs(urlsplit(url).query)
        files += query.get("passfile", []) + query.get("sslkey", [])
    return [os.path.expanduser(f) for f in files]


#: what the sandbox's own /proc and /dev stand for; never bound from the host
_KERNEL = ("/proc", "/sys", "/dev")


def _program_roots(argv: Sequence[str], cwd: str | None,
                   covered: Sequence[str]) -> list[str]:
    """The top-level entries of ``covered`` areas (``/tmp/x`` of ``/tmp/x/venv/bin/python``)
    holding the program of ``argv`` or a path among its arguments."""
    roots: set[str] = set()
    for i, word in enumerate(argv):
        if i == 0 and os.sep not in word:
            path = shutil.which(word)
        elif os.path.isabs(word):
            path = word
        else:
            path = os.path.join(cwd, word) if cwd else None
        if not path or not os.path.exists(path):
            continue
        for p in {os.path.abspath(path), os.path.realpath(path)}:
            for area in covered:
                if _under(p, area) and p != area:
                    roots.add(os.path.join(area, os.path.relpath(p, area).split(os.sep)[0]))
    return sorted(roots)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class Sandbox:
    """The boundary of one owner: its settings, what the probe found, what it hides."""

    def __init__(self, config: SandboxConfig, found: Probe, *, home: Path,
                 hidden_files: Iterable[str] = (), environ: Mapping[str, str] | None = None,
                 secrets: Iterable[str | None] = ()) -> None:
        self.config = config
        self.probe = found
        self._home = os.path.realpath(home)
        self._files = sorted({os.path.realpath(f) for f in hidden_files})
        #: the environment every command runs with (env.py's allowlist)
        self.env = command_env(os.environ if environ is None else environ, config.env_allow,
                               secrets)

    def boundary(self, requested: str | None = None) -> str:
        """What a command of a turn that asked for ``requested`` runs in:
        ``workspace-write``, ``read-only``, or ``none``."""
        mode = clamp(self.config.mode, requested)
        return NONE if mode == "off" or not self.probe.ok else mode

    def describe(self) -> str:
        """One line naming the boundary in force (``tether doctor``, ``config check``)."""
        return describe(self.config, self.probe)

    def argv(self, command: str, cwd: str, boundary: str, *, workspace: str) -> list[str]:
        """The argv that runs ``command`` (a /bin/sh command line) in ``cwd`` within
        ``boundary`` (``workspace-write``, ``read-only`` or ``none``), where only
        ``workspace`` (the session's cwd, never a directory the model named) may be
        written."""
        shell = ["/bin/sh", "-c", command]
        if boundary == NONE:
            return shell
        return [*self._bwrap(cwd, boundary, workspace), "--", *shell]

    def editor_argv(self, command: str, cwd: str, boundary: str, *, workspace: str,
                    env: Mapping[str, str]) -> list[str]:
        """The argv that runs ``command`` as `argv` does within ``boundary`` (never
        ``none``), for a process the owner does not start itself (an editor's
        terminal): all of it is in the argv. The environment is ``env``, set inside
        the sandbox (``--clearenv``: whatever environment the process that starts
        bwrap has stays outside it), and standard input is closed, as the owner's own
        commands have it (a terminal's would wait for a person)."""
        if boundary == NONE:
            raise ValueError("a command without a sandbox runs in the owner")
        bwrap = self._bwrap(cwd, boundary, workspace)
        setenv = [x for k, v in sorted(env.items()) for x in ("--setenv", k, v)]
        return [bwrap[0], "--clearenv", *setenv, *bwrap[1:], "--",
                "/bin/sh", "-c", 'exec /bin/sh -c "$1" </dev/null', "sh", command]

    def _bwrap(self, cwd: str, boundary: str, workspace: str) -> list[str]:
        """bwrap and its options for a command in ``cwd`` within ``boundary``."""
        if boundary not in ("workspace-write", "read-only") or self.probe.bwrap is None:
            raise ValueError(f"no sandbox {boundary!r} can be made here")
        return [self.probe.bwrap, *self._mounts(os.path.realpath(workspace), boundary),
                "--chdir", os.path.realpath(cwd)]

    def serves(self) -> bool:
        """Whether long-running helpers (MCP stdio servers) run in a sandbox here."""
        return self.config.mode != "off" and self.probe.ok

    def server_argv(self, argv: Sequence[str], *, state_dir: str, network: bool,
                    cwd: str | None = None) -> list[str]:
        """The argv that runs ``argv`` (an MCP stdio server) in a sandbox: the
        filesystem read-only, a private /tmp, the owner's home and the store's
        credential files covered, the network shared when ``network``, and only
        ``state_dir`` (made if missing; the server's HOME, for its caches) writable.
        The server starts in ``cwd`` when that stays visible, in ``state_dir``
        otherwise."""
        if not self.serves() or self.probe.bwrap is None:
            raise ValueError("no sandbox can be made here for a server")
        state = os.path.realpath(state_dir)
        os.makedirs(state, mode=0o700, exist_ok=True)
        out = [self.probe.bwrap, *_BASE]
        covered = ["/tmp"] if network else ["/tmp", "/run"]
        if not network:
            out.append("--unshare-net")
        for area in covered:
            out += ["--tmpfs", area]
        # the server's own program and files, where they lie in a covered area (a
        # virtualenv or a checkout under /tmp), are shown again, read-only
        shown = _program_roots(argv, cwd, covered)
        for root in shown:
            out += ["--ro-bind", root, root]
        home = self._home
        if not any(_under(home, a) for a in covered) or any(_under(home, r) for r in shown):
            out += ["--tmpfs", home]
        for path in self._files:
            visible = not _under(path, home) and (
                not any(_under(path, a) for a in covered) or any(_under(path, r) for r in shown))
            if visible and os.path.lexists(path) and not os.path.isdir(path):
                out += ["--ro-bind", "/dev/null", path]
        hidden = (*covered, home)
        out += ["--bind", state, state]
        where = os.path.realpath(cwd) if cwd else state
        if not os.path.isdir(where) or any(_under(where, a) for a in hidden) \
                or any(_under(where, k) for k in _KERNEL):
            where = state
        return [*out, "--chdir", where, "--", *argv]

    def _mounts(self, cwd: str, boundary: str) -> list[str]:
        out = list(_BASE)
        if not self.config.network:
            out.append("--unshare-net")
        # covered areas, cwd bound again on top of them, then what the cwd must not show
        covered = ["/tmp"] + ([] if self.config.network else ["/run"])
        for area in covered:
            out += ["--tmpfs", area]
        home = self._home
        if not any(_under(home, area) for area in covered):
            out += ["--tmpfs", home]
        if cwd == "/" or any(_under(cwd, k) for k in _KERNEL) or not os.path.isdir(cwd):
            # a workspace that would bind the whole tree or the kernel's back in (or
            # is not there to bind) gets no writable directory at all
            cwd = "/nonexistent"
        else:
            out += ["--bind" if boundary == "workspace-write" else "--ro-bind", cwd, cwd]
        if cwd == home:
            # the home itself is the cwd: cover what is in it, entry by entry
            out += self._cover_entries(home)
        elif _under(home, cwd):
            out += ["--tmpfs", home]
        for path in self._files:
            visible = _under(path, cwd) or not any(_under(path, a) for a in (*covered, home))
            if visible and os.path.lexists(path) and not os.path.isdir(path):
                out += ["--ro-bind", "/dev/null", path]
        return out

    @staticmethod
    def _cover_entries(home: str) -> list[str]:
        out: list[str] = []
        try:
            entries = list(os.scandir(home))
        except OSError:
            return out
        for entry in entries:
            is_dir = entry.is_dir(follow_symlinks=False)
            out += ["--tmpfs", entry.path] if is_dir else ["--ro-bind", "/dev/null", entry.path]
        return out


#: what typical refusals by the sandbox print, by what they refused
_WRITE_REFUSED = ("Read-only file system",)
_NETWORK_REFUSED = ("Temporary failure in name resolution", "Network is unreachable",
                    "Could not resolve host", "Name or service not known",
                    "No address associated with hostname", "Connection refused",
                    "Cannot assign requested address")


def refusal(boundary: str, network: bool, exit_code: int | None, output: str,
            cwd: str) -> str | None:
    """A hint for the model when a sandboxed command failed the way the sandbox makes
    commands fail (a write outside the workspace, the network); None otherwise."""
    if boundary == NONE or exit_code in (0, None):
        return None
    what = None
    if any(s in output for s in _WRITE_REFUSED) or _denied_outside(output, cwd):
        what = "a write outside the working directory " + cwd if boundary == "workspace-write" \
            else "a write (read-only: nothing may be written but the private /tmp)"
    elif not network and any(s in output for s in _NETWORK_REFUSED):
        what = "network access (the sandbox has no network)"
    if what is None:
        return None
    return (f"the sandbox ({boundary}) refused {what}. If this really needs to run outside "
            "it, call terminal again with escalate: true and a reason (a person must "
            "approve it); otherwise work inside the working directory")


def _denied_outside(output: str, cwd: str) -> bool:
    """A "Permission denied" about an absolute path outside ``cwd`` and /tmp."""
    for line in output.splitlines():
        if "Permission denied" not in line:
            continue
        for word in line.replace("'", " ").replace('"', " ").replace(":", " ").split():
            if word.startswith("/") and not (_under(word, cwd) or _under(word, "/tmp")):
                return True
    return False
