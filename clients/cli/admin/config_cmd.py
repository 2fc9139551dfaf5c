"""``tether config check``: the configuration an owner of this home would start with.

It reads ``<home>/config.yaml`` and the environment exactly as the owner does
(``tether.daemon.config.report``, imported only here: PyYAML, pydantic-free
but not free), and prints every setting with its value and where that came
from (``default``, ``config.yaml``, ``env NAME``), secrets masked. A
configuration the owner would refuse is reported as ``tether: invalid_config:
…`` with a hint, exit 2. Never starts an owner; when one runs, says that it
uses what it read when it started.
"""

from __future__ import annotations

import os
from typing import Any

from ...library.exits import CONTEXT, EXIT_OK, EXIT_USAGE, CliError

__all__ = ["cmd_config", "check_config", "home_source"]

def home_source(args: Any) -> str:
    """Where the home came from: the --home flag, $TETHER_HOME, or the default."""
    if getattr(args, "home", None):
        return "flag --home"
    return "env TETHER_HOME" if os.environ.get("TETHER_HOME") else "default"


def check_config(home: Any) -> Any:
    """The ConfigReport of ``home`` in this environment; an invalid configuration
    raises the CliError the user sees."""
    from tether.daemon.config.core import ConfigError
    from tether.daemon.config.report import config_report
    from tether.rpc.home import HomeLayout

    try:
        return config_report(HomeLayout(home).config, os.environ)
    except ConfigError as exc:
        errors = getattr(exc, "errors", None) or [str(exc)]
        detail = errors[0] if len(errors) == 1 else \
            f"{len(errors)} problems:\n" + "\n".join(f"  - {e}" for e in errors)
        raise CliError(EXIT_USAGE, "invalid_config", detail,
                       f"fix {HomeLayout(home).config} (docs/configuration.md lists every "
                       "key); until then an owner of this home refuses to start") from None


def describe_turns(defaults: dict[str, Any]) -> str:
    where = f"at {defaults['base_url']}" if defaults.get("base_url") else "(offline)"
    return f"{defaults['provider']} {where}, model {defaults['model']}"


def cmd_config(args: Any) -> int:
    from tether.rpc.home import HomeLayout, resolve_home

    CONTEXT.home = home = resolve_home(args.home)
    report = check_config(home)
    path = HomeLayout(home).config
    from tether.daemon.toolsets.sandbox import describe, probe

    boundary = describe(report.config.sandbox, probe())
    if args.json:
        import orjson

        print(orjson.dumps({
            "home": str(home), "home_source": home_source(args), "file": str(path),
            "file_exists": path.exists(), "valid": True,
            "turn_defaults": report.turn_defaults, "sandbox": boundary,
            "settings": {s.key: {"value": s.value, "source": s.source}
                         for s in report.settings},
        }).decode())
        return EXIT_OK
    print(f"home    {home} ({home_source(args)})")
    print(f"file    {path}: " + ("valid" if path.exists() else
                                     "none, so defaults and environment only: valid"))
    print(f"turns   {describe_turns(report.turn_defaults)} (when a session and its prompt "
          "name none)")
    print(f"sandbox {boundary} (commands of an owner started from here)")
    _owner_note(home)
    print()
    key_width = max(len(s.key) for s in report.settings)
    values = [_text(s.value, s.key) for s in report.settings]
    value_width = min(max(len(v) for v in values), 40)
    for s, v in zip(report.settings, values, strict=True):
        print(f"{s.key:<{key_width}}  {v:<{value_width}}  {s.source}")
    return EXIT_OK


def _owner_note(home: Any) -> None:
    from ...library.discovery import live_descriptor
    from ..commands import config_changed_since

    desc = live_descriptor(home)
    if desc is None:
        return
    print(f"owner   running (pid {desc.get('pid')}, started {desc.get('started_at')}): it uses "
          "the configuration it read then (`tether status` shows its provider and model)")
    if changed := config_changed_since(home, desc.get("started_at")):
        print(f"note    {changed}")


def _text(value: Any, key: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(value) if value else "[]"
    if isinstance(value, dict) and key == "model.prices":
        import orjson

        return orjson.dumps(value).decode() if value else "{}"
    if isinstance(value, dict):  # an MCP server: its non-empty keys, key=value
        return "; ".join(f"{k}={_text(v)}" for k, v in value.items()
                         if v not in ([], {}, None) and v != {"allow": [], "deny": []})
    return str(value)
