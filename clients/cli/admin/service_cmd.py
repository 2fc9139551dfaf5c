"""``tether service install | uninstall | status`` (the files: service.py).

Exit status: 0 done (or, for ``install``, the file written where no service manager
can be reached: what is left to do is said on stderr); 1 the service manager refused
(``install``/``uninstall``), the owner it started did not come up, or (``status``)
no service is installed; 2 usage.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from ...library.exits import EXIT_OK, CliError
from .service import (
    Service,
    disable_commands,
    enable_commands,
    launchd_unusable,
    resolve,
    show,
    systemd_unusable,
)
from .service import _manager_run as run_manager

__all__ = ["cmd_service", "EXIT_SERVICE_FAILED"]

#: the manager refused, the owner did not come up, or (status) nothing is installed
EXIT_SERVICE_FAILED = 1
#: how long install waits for the owner the service manager started
UP_TIMEOUT = 20.0


def cmd_service(args: Any) -> int:
    svc = resolve(args)
    if args.action == "install":
        return _install(svc, args.dry_run)
    if args.action == "uninstall":
        return _uninstall(svc, args.dry_run)
    return _status(svc)


def _unusable(svc: Service) -> str | None:
    return systemd_unusable() if svc.platform == "systemd" else launchd_unusable()


def _how_to_enable(svc: Service) -> str:
    steps = " && ".join(show(c) for c in enable_commands(svc))
    if svc.platform == "systemd":
        user = os.environ.get("USER") or "$USER"
        return (f"in a login session of this user, run `{steps}`; on a server, run "
                f"`loginctl enable-linger {user}` first so that the user's services start at "
                "boot and outlive the last login")
    return f"in this user's desktop session, run `{steps}`"


def _install(svc: Service, dry_run: bool) -> int:
    from ...library.discovery import live_descriptor

    text = svc.text()
    if dry_run:
        print(f"# {svc.path}")
        print(text, end="" if text.endswith("\n") else "\n")
        print("# then: " + " && ".join(show(c) for c in enable_commands(svc)))
        return EXIT_OK
    svc.path.parent.mkdir(parents=True, exist_ok=True)
    # 0600: the command line may hold a store URL with its password
    tmp = svc.path.with_name(svc.path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(tmp, svc.path)
    print(f"tether: wrote {svc.path}")
    why = _unusable(svc)
    if why is not None:
        print(f"tether: {why}, so the service is written but not enabled: it does not start "
              f"at login yet. To enable it: {_how_to_enable(svc)}.", file=sys.stderr)
        return EXIT_OK
    running = live_descriptor(svc.home)
    commands = enable_commands(svc)
    if running is not None:
        # the service's owner would find the home taken and exit: enable it for the
        # next login, and leave the running owner alone
        if svc.platform == "systemd":
            commands = [commands[0], ["systemctl", "--user", "enable", svc.name]]
        else:
            commands = []
    for argv in commands:
        code, said = run_manager(argv)
        if code != 0:
            raise CliError(EXIT_SERVICE_FAILED, "service_failed",
                           f"`{show(argv)}` failed (exit {code}): {said}",
                           f"the file is written ({svc.path}); fix what it says and run "
                           "`tether service install` again")
    if running is not None:
        start = (f"systemctl --user start {svc.name}" if svc.platform == "systemd"
                 else show(enable_commands(svc)[0]))
        print(f"tether: an owner already runs for {svc.home} (pid {running.get('pid')}), "
              f"outside the service; the service takes over at the next login, or now with "
              f"`tether stop && {start}`")
        return EXIT_OK
    return _wait_up(svc)


def _wait_up(svc: Service) -> int:
    from ...library.discovery import live_descriptor

    deadline = time.monotonic() + UP_TIMEOUT
    while time.monotonic() < deadline:
        desc = live_descriptor(svc.home)
        if desc is not None:
            print(f"tether: the service {svc.name} is enabled and its owner runs "
                  f"(pid {desc.get('pid')}); it starts at every login")
            return EXIT_OK
        time.sleep(0.2)
    look = (f"`systemctl --user status {svc.name}` and `journalctl --user -u {svc.name}`"
            if svc.platform == "systemd" else f"{svc.home / 'logs' / 'service.log'}")
    raise CliError(EXIT_SERVICE_FAILED, "service_not_running",
                   f"the service {svc.name} is enabled, but no owner came up for {svc.home} "
                   f"within {UP_TIMEOUT:g} s", f"{look} say why; so does `tether logs`")


def _uninstall(svc: Service, dry_run: bool) -> int:
    if not svc.path.exists():
        print(f"tether: no service is installed for {svc.home} ({svc.path} does not exist)")
        return EXIT_OK
    commands = disable_commands(svc)
    if dry_run:
        for argv in commands:
            print(show(argv))
        print(f"rm {svc.path}")
        if svc.platform == "systemd":
            print("systemctl --user daemon-reload")
        return EXIT_OK
    why = _unusable(svc)
    if why is None:
        for argv in commands:
            code, said = run_manager(argv)
            # not loaded (never enabled here, or already stopped) is no reason to keep the file
            if code != 0 and "not loaded" not in said and "No such" not in said \
                    and "not found" not in said:
                raise CliError(EXIT_SERVICE_FAILED, "service_failed",
                               f"`{show(argv)}` failed (exit {code}): {said}",
                               f"the file is left in place ({svc.path})")
    svc.path.unlink()
    if why is None and svc.platform == "systemd":
        run_manager(["systemctl", "--user", "daemon-reload"])
    print(f"tether: removed {svc.path}" + (
        "; the owner it ran was stopped" if why is None else
        f" ({why}: nothing was disabled; an owner it started elsewhere is left running)"))
    return EXIT_OK


def _runs(svc: Service) -> str:
    """The command line in the installed file."""
    text = svc.path.read_text(encoding="utf-8")
    if svc.platform == "systemd":
        for line in text.splitlines():
            if line.startswith("ExecStart="):
                return line.removeprefix("ExecStart=")
        return "(no ExecStart= line)"
    import plistlib

    try:
        return show([str(a) for a in plistlib.loads(text.encode()).get("ProgramArguments", [])])
    except Exception:  # noqa: BLE001 - a hand-edited plist: say so, do not fail
        return "(not a plist this command can read)"


def _status(svc: Service) -> int:
    from ...library.discovery import live_descriptor

    installed = svc.path.exists()
    print(f"service   {svc.name} ({svc.platform}) for {svc.home}")
    print(f"file      {svc.path}" + ("" if installed else " — not installed"))
    if installed:
        print(f"runs      {_runs(svc)}")
    why = _unusable(svc)
    if why is not None:
        print(f"manager   unavailable: {why}")
    elif svc.platform == "systemd":
        enabled = run_manager(["systemctl", "--user", "is-enabled", svc.name])[1] or "unknown"
        active = run_manager(["systemctl", "--user", "is-active", svc.name])[1] or "unknown"
        print(f"manager   systemd: {enabled}, {active}")
    else:
        code, _ = run_manager(["launchctl", "print", f"gui/{os.getuid()}/{svc.name}"])
        print(f"manager   launchd: {'loaded' if code == 0 else 'not loaded'}")
    desc = live_descriptor(svc.home)
    print("owner     " + (f"running (pid {desc.get('pid')})" if desc is not None
                          else "not running"))
    if not installed:
        print("`tether service install` installs it", file=sys.stderr)
        return EXIT_SERVICE_FAILED
    return EXIT_OK
