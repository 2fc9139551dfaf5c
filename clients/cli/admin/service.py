"""``tether service install | uninstall | status``: an owner that starts at login.

On Linux a systemd user unit (``$XDG_CONFIG_HOME/systemd/user/tether.service``), on
macOS a launchd agent (``~/Library/LaunchAgents/dev.tether.owner.plist``), each
running ``tether serve --foreground --home HOME`` (plus the ``--tcp``/``--store``
given) and starting it again when it fails. A home other than the platform's
default gets its own unit, ``tether-<8 hex of the home's path>``, so each home can
have one. ``tether stop`` makes the owner exit 0, which neither manager restarts.

When the service manager cannot be reached (no user systemd, as in a container or
an ssh session without a user manager), ``install`` still writes the file, says so
and how to enable it, and exits 0: the file is what was asked for, as ``systemctl
enable`` does in a chroot. It exits 1 when the manager is there and refused.
docs/service.md is the user's page.
"""

from __future__ import annotations

import hashlib
import os
import plistlib
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...library.exits import CONTEXT, EXIT_USAGE, CliError

__all__ = ["Service", "launchd_plist", "resolve", "service_for", "systemd_unit"]

#: the label of the default home's launchd agent (others add ``-<hash>``)
LAUNCHD_LABEL = "dev.tether.owner"
#: how long one systemctl/launchctl call may take
MANAGER_TIMEOUT = 30.0


@dataclass(frozen=True)
class Service:
    """One home's service: where its file goes, what it runs."""

    platform: str  # systemd | launchd
    home: Path
    name: str  # the unit's name (tether.service) or the agent's label
    path: Path  # the unit file or the plist
    argv: list[str]  # the owner's command line
    env_path: str  # PATH the owner (and the commands its agent runs) sees

    def text(self) -> str:
        return systemd_unit(self) if self.platform == "systemd" else launchd_plist(self)


def _suffix(home: Path) -> str:
    from tether.rpc.home import HOME_ENV

    saved = os.environ.pop(HOME_ENV, None)
    try:
        from tether.rpc.home import resolve_home

        default = resolve_home(None)
    finally:
        if saved is not None:
            os.environ[HOME_ENV] = saved
    if home == default:
        return ""
    return "-" + hashlib.sha256(str(home).encode()).hexdigest()[:8]


def _tether_argv() -> list[str]:
    """How to run this very tether: the console script beside this Python, else the
    one on PATH, else ``python -m tether.clients.cli``."""
    beside = Path(sys.executable).with_name("tether")
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("tether")
    if found:
        return [str(Path(found).absolute())]
    return [sys.executable, "-m", "tether.clients.cli"]


def service_for(home: Path, platform: str, *, tcp: str | None = None,
                store: str | None = None) -> Service:
    suffix = _suffix(home)
    argv = [*_tether_argv(), "serve", "--foreground", "--home", str(home)]
    argv += ["--tcp", tcp] if tcp else []
    argv += ["--store", store] if store else []
    env_path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    if platform == "systemd":
        config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        name = f"tether{suffix}.service"
        return Service(platform, home, name, Path(config) / "systemd" / "user" / name, argv,
                       env_path)
    label = LAUNCHD_LABEL + suffix
    return Service(platform, home, label,
                   Path.home() / "Library" / "LaunchAgents" / f"{label}.plist", argv, env_path)


def _quote(arg: str) -> str:
    """One argument of ExecStart= (systemd's quoting: double quotes, backslash escapes;
    a ``%`` is a specifier and a ``$`` a variable unless doubled)."""
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"' if any(c in arg for c in ' \t"\'\\%$;') or not arg else escaped


def systemd_unit(svc: Service) -> str:
    exec_start = " ".join(_quote(a) for a in svc.argv)
    return f"""# Written by `tether service install`; `tether service uninstall` removes it.
[Unit]
Description=tether owner for {svc.home}
After=network-online.target
Wants=network-online.target
StartLimitIntervalSec=300
StartLimitBurst=5

[Service]
Type=simple
ExecStart={exec_start}
Environment={_quote("PATH=" + svc.env_path)}
# `tether stop` and SIGTERM make the owner exit 0: not restarted. A crash is.
Restart=on-failure
RestartSec=5
# 2: invalid configuration, 3: another owner already runs for this home
RestartPreventExitStatus=2 3
TimeoutStopSec=75
KillMode=mixed

[Install]
WantedBy=default.target
"""


def launchd_plist(svc: Service) -> str:
    logs = svc.home / "logs"
    agent: dict[str, Any] = {
        "Label": svc.name,
        "ProgramArguments": svc.argv,
        "EnvironmentVariables": {"PATH": svc.env_path},
        "RunAtLoad": True,
        # started again when it exits with a failure; `tether stop` exits 0
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 5,
        "ExitTimeOut": 75,
        "ProcessType": "Interactive",
        "StandardOutPath": str(logs / "service.log"),
        "StandardErrorPath": str(logs / "service.log"),
    }
    return plistlib.dumps(agent, sort_keys=False).decode()


# -- the service managers ---------------------------------------------------------------


def _manager_run(argv: list[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=MANAGER_TIMEOUT,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, " ".join((proc.stderr or proc.stdout).split())


def systemd_unusable() -> str | None:
    """Why ``systemctl --user`` cannot be used here, or None if it can."""
    if shutil.which("systemctl") is None:
        return "there is no systemctl on this machine"
    code, said = _manager_run(["systemctl", "--user", "show-environment"])
    if code != 0:
        return f"systemctl --user cannot reach a user service manager ({said or f'exit {code}'})"
    return None


def launchd_unusable() -> str | None:
    return None if shutil.which("launchctl") else "there is no launchctl on this machine"


def enable_commands(svc: Service) -> list[list[str]]:
    if svc.platform == "systemd":
        return [["systemctl", "--user", "daemon-reload"],
                ["systemctl", "--user", "enable", "--now", svc.name]]
    return [["launchctl", "bootstrap", f"gui/{os.getuid()}", str(svc.path)]]


def disable_commands(svc: Service) -> list[list[str]]:
    if svc.platform == "systemd":
        return [["systemctl", "--user", "disable", "--now", svc.name]]
    return [["launchctl", "bootout", f"gui/{os.getuid()}/{svc.name}"]]


def show(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def resolve(args: Any) -> Service:
    """The service of the home and flags ``args`` name."""
    from tether.rpc.home import resolve_home

    CONTEXT.home = home = resolve_home(args.home)
    platform = args.platform or ("launchd" if sys.platform == "darwin" else "systemd")
    if args.action != "install" and (args.tcp or args.store):
        raise CliError(EXIT_USAGE, "usage", "--tcp and --store go with `tether service install`",
                       "see `tether service --help`")
    return service_for(home, platform, tcp=args.tcp, store=args.store)
