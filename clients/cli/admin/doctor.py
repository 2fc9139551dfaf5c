"""``tether doctor``: one line per check, each ``ok`` or ``FAIL`` with the fix.

The checks, in order: the configuration (as ``tether config check`` reads
it); the owner (running, with its pid and addresses, or not); its socket (it
answers ``runtime.describe``, at the CLI's version); its settings (the
provider and model it runs with are what the configuration here says);
the sandbox (the boundary around the agent's commands: the running owner's,
else what an owner started here would have; ``warn`` when there is none);
the model endpoint (``GET {base_url}/models`` with the configured key: a
server is there, takes the key and serves the model; tether.daemon.model.probe);
streaming (a small streamed request carrying one tool, then without streaming if
the server cannot stream it: which ``model.stream`` works); then one line per MCP server of the configuration, with the state the running
owner reports (a server that failed to start is a FAIL with its error).
A check that cannot run because an earlier one failed, or has nothing to look
at, says ``skip``. Exit 0 when nothing failed, 1 otherwise. Never starts an
owner; imports the daemon's config and httpx, so it is not a fast path.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from typing import Any

from ...library.exits import CONTEXT, EXIT_OK, EXIT_TURN, CliError
from ...library.version import installed_version

__all__ = ["cmd_doctor", "EXIT_CHECK_FAILED"]

#: `tether doctor`'s exit status when a check failed
EXIT_CHECK_FAILED = EXIT_TURN
#: how long the owner has to answer runtime.describe
DESCRIBE_TIMEOUT = 5.0


@dataclass
class Check:
    name: str
    state: str  # ok | FAIL | warn | skip (warn: works, but less safely; exit 0)
    detail: str
    fix: str = ""


def cmd_doctor(args: Any) -> int:
    from tether.rpc.home import resolve_home

    CONTEXT.home = home = resolve_home(args.home)
    checks: list[Check] = []
    report = _config(home, checks)
    desc = _owner(home, checks)
    runtime = _socket(home, desc, checks)
    _settings(report, runtime, checks)
    _sandbox(report, runtime, checks)
    served = _model(report, checks)
    _stream(report, served, checks)
    _mcp(report, runtime, checks)
    tty = sys.stdout.isatty()
    marks = {"ok": "✓", "FAIL": "✗", "skip": "-", "warn": "!"} if tty else {}
    width = max(len(c.name) for c in checks)
    for c in checks:
        mark = marks.get(c.state, c.state)
        print(f"{mark:<4} {c.name:<{width}}  {c.detail}")
        if c.fix:
            print(f"{'':<4} {'':<{width}}  fix: {c.fix}")
    return EXIT_CHECK_FAILED if any(c.state == "FAIL" for c in checks) else EXIT_OK


def _config(home: Any, checks: list[Check]) -> Any:
    from .config_cmd import check_config, describe_turns

    try:
        report = check_config(home)
    except CliError as err:
        checks.append(Check("config", "FAIL", err.detail, err.hint))
        return None
    checks.append(Check("config", "ok", f"valid: turns use {describe_turns(report.turn_defaults)}"))
    return report


def _owner(home: Any, checks: list[Check]) -> dict[str, Any] | None:
    """The descriptor of a running owner (its pid alive), or None."""
    from ...library.discovery import lock_holder, pid_alive, read_descriptor

    desc = read_descriptor(home)
    if desc is not None and pid_alive(desc.get("pid")):
        where = str(desc.get("socket"))
        if desc.get("tcp_url"):
            where += f" and {desc['tcp_url']}"
        checks.append(Check("owner", "ok", f"running: pid {desc.get('pid')}, "
                                           f"started {desc.get('started_at')}, at {where}"))
        return desc
    holder = lock_holder(home)
    if holder is not None:
        checks.append(Check("owner", "FAIL", f"pid {holder} holds daemon.lock but has not "
                                             "written daemon.json: starting, or stuck",
                            f"run `tether doctor` again in a moment; if it stays, `tether "
                            f"logs` shows why, and `kill {holder}` ends it"))
        return None
    stale = f" (daemon.json of pid {desc.get('pid')} is left from a crash; harmless)" \
        if desc is not None else ""
    checks.append(Check("owner", "ok", f"not running{stale}; `tether chat` or `tether serve` "
                                       "starts one"))
    return None


def _socket(home: Any, desc: dict[str, Any] | None, checks: list[Check]) -> dict[str, Any] | None:
    """runtime.describe of the running owner, or None."""
    from tether.rpc.errors import RpcError

    from ...library.client import ConnectionLost
    from ...library.discovery import OwnerUnavailable

    if desc is None:
        checks.append(Check("socket", "skip", "no owner running"))
        return None
    pid, sock = desc.get("pid"), str(desc.get("socket"))
    if not _accepts(sock):
        checks.append(Check("socket", "FAIL",
                            f"{sock} accepts no connection, though pid {pid} of daemon.json "
                            "exists", f"if pid {pid} is a stuck owner, `kill {pid}`; if it is "
                            "another program (its pid reused after a crash), the next command "
                            "starts an owner. `tether logs` shows what the owner did last"))
        return None
    try:
        info = asyncio.run(asyncio.wait_for(_describe(home), DESCRIBE_TIMEOUT))
    except (OSError, TimeoutError, OwnerUnavailable, ConnectionLost, RpcError) as exc:
        what = f"{exc.reason}: {exc.detail}" if isinstance(exc, OwnerUnavailable) else \
            f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        checks.append(Check("socket", "FAIL",
                            f"{desc.get('socket')} does not answer ({what})",
                            f"`tether logs` shows what the owner is doing; `tether stop` (or "
                            f"`kill {desc.get('pid')}`) and the next command starts a new one"))
        return None
    mine = installed_version()
    if info.get("version") != mine:
        checks.append(Check("socket", "FAIL",
                            f"the owner answers, but runs tether {info.get('version')} and this "
                            f"CLI is {mine}", "`tether stop`; the next command starts an "
                                              "owner of this version"))
        return info
    checks.append(Check("socket", "ok", f"answers at {desc.get('socket')} (tether "
                                        f"{info.get('version')}, {info.get('protocol')})"))
    return info


def _accepts(path: str) -> bool:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(DESCRIBE_TIMEOUT)
        try:
            s.connect(path)
        except OSError:
            return False
    return True


async def _describe(home: Any) -> dict[str, Any]:
    from ...library.client import TetherClient

    async with await TetherClient.connect(home, autostart=False) as client:
        return await client.describe()


def _settings(report: Any, runtime: dict[str, Any] | None, checks: list[Check]) -> None:
    """Whether the running owner uses what the configuration here says."""
    from .config_cmd import describe_turns

    if runtime is None:
        checks.append(Check("settings", "skip", "no owner answering"))
        return
    if report is None:
        checks.append(Check("settings", "skip", "no valid configuration to compare it with"))
        return
    theirs = runtime.get("turn_defaults")
    if not isinstance(theirs, dict):
        checks.append(Check("settings", "skip", "the owner does not report its settings"))
        return
    if theirs != report.turn_defaults:
        checks.append(Check("settings", "FAIL",
                            f"the owner runs {describe_turns(theirs)}; the configuration here "
                            f"gives {describe_turns(report.turn_defaults)}",
                            "the owner read config.yaml and its environment when it started: "
                            "`tether stop`, and the next command starts one with these"))
        return
    checks.append(Check("settings", "ok", "the owner uses the configuration here"))


#: how to get a sandbox where there is none
SANDBOX_FIX = ("install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: "
               "`dnf install bubblewrap`), make sure user namespaces are enabled, then "
               "`tether stop` so the next owner finds it")


def _sandbox(report: Any, runtime: dict[str, Any] | None, checks: list[Check]) -> None:
    """The boundary around the agent's commands: the running owner's, or the one an
    owner started from here would have."""
    said = runtime.get("sandbox") if runtime is not None else None
    if isinstance(said, str):
        where = "the owner runs commands in: "
    elif report is None:
        checks.append(Check("sandbox", "skip", "the configuration is invalid"))
        return
    else:
        from tether.daemon.toolsets.sandbox import describe, probe

        said, where = describe(report.config.sandbox, probe()), "an owner started here: "
    if not said.startswith("none"):
        checks.append(Check("sandbox", "ok", where + said))
    elif "sandbox.mode is off" in said:
        checks.append(Check("sandbox", "warn", where + said,
                            "set sandbox.mode: workspace-write in config.yaml (docs/"
                            "configuration.md) unless something else contains this owner"))
    else:
        checks.append(Check("sandbox", "warn", where + said, SANDBOX_FIX))


def _model(report: Any, checks: list[Check]) -> bool:
    """Whether the configured model is served (so a request to it can be tried)."""
    if report is None:
        checks.append(Check("model", "skip", "the configuration is invalid"))
        return False
    defaults = report.turn_defaults
    if defaults["provider"] == "demo":
        checks.append(Check("model", "ok", "provider demo is offline: it needs no endpoint"))
        return False
    from tether.daemon.config.turn import endpoint, resolve_turn
    from tether.daemon.model.probe import probe_models

    m = report.config.model
    # the endpoint and key of a turn that names none: the key goes only where the
    # owner would send it, and the URL is the real one (a shown one has no credentials)
    turn = resolve_turn(report.config, {}, {})
    url = endpoint(turn.provider, turn.base_url)
    if url is None:
        checks.append(Check("model", "FAIL", f"provider {turn.provider} has no base_url",
                            "set model.base_url (or OPENAI_BASE_URL) to the server's "
                            "OpenAI-compatible root, e.g. http://127.0.0.1:8000/v1"))
        return False
    probe = probe_models(url, turn.api_key, turn.model,
                         connect_timeout=m.connect_timeout_seconds,
                         timeout=min(m.timeout_seconds, 30.0))
    checks.append(Check("model", "ok" if probe.ok else "FAIL", probe.detail, probe.fix))
    return probe.ok


def _stream(report: Any, served: bool, checks: list[Check]) -> None:
    """A small streamed request with one tool: which model.stream works with the server."""
    if not served:
        why = "provider demo streams" if report is not None and \
            report.turn_defaults["provider"] == "demo" else "no served model to ask"
        checks.append(Check("stream", "skip", why))
        return
    from tether.daemon.config.turn import endpoint, resolve_turn
    from tether.daemon.model.probe import probe_streaming

    m = report.config.model
    turn = resolve_turn(report.config, {}, {})
    url = endpoint(turn.provider, turn.base_url)
    assert url is not None  # _model found the model served there
    probe = probe_streaming(url, turn.api_key, turn.model, m.stream,
                            connect_timeout=m.connect_timeout_seconds,
                            timeout=min(m.timeout_seconds, 60.0))
    checks.append(Check("stream", "ok" if probe.ok else "FAIL", probe.detail, probe.fix))


def _mcp(report: Any, runtime: dict[str, Any] | None, checks: list[Check]) -> None:
    """One line per configured MCP server, in the state the running owner reports."""
    names = [s.name for s in report.config.mcp.servers] if report is not None else []
    reported = {s["name"]: s for s in (runtime or {}).get("mcp_servers") or []}
    for name in names or list(reported):
        s = reported.get(name)
        what = f"mcp:{name}"
        if s is None:
            why = "no owner answering" if runtime is None else \
                "the running owner does not have it (it started before it was added)"
            checks.append(Check(what, "skip", why))
        elif s["state"] == "failed":
            checks.append(Check(what, "FAIL", f"{s['transport']} {s['target']}: {s['error']}",
                                f"fix mcp.servers.{name} in config.yaml (a stdio server's "
                                f"stderr is in logs/mcp-{name}.log); `tether mcp tools {name}` "
                                "tries it again"))
        elif s["state"] == "ready":
            where = f"; {s['sandbox']}" if s.get("sandbox") else ""
            checks.append(Check(what, "ok", f"{s['transport']} {s['target']}: ready, "
                                            f"{len(s['tools'])} tools{where}"))
        elif s["state"] == "disabled":
            checks.append(Check(what, "skip", "enabled: false in config.yaml"))
        else:
            checks.append(Check(what, "ok", f"{s['transport']} {s['target']}: {s['state']} "
                                            f"(started when a turn needs it; `tether mcp "
                                            f"tools {name}` starts it now)"))
