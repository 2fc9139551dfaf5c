"""The effective configuration as `tether config check` and `tether doctor` show it.

Every setting of ``Config``, with its value and where the value came from:
``default``, ``config.yaml``, or ``env NAME`` (the environment rules of
``config.build_config``). Secrets are never shown: an API key is ``(set)``, or
its last four characters after an ellipsis (``sk-…abcd``) when it is long
enough that those say nothing useful about the rest; an endpoint is shown
without user, password or query (``settings.shown_url``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .core import Config, ConfigError, build_config, read_config_file
from .turn import shown_url, turn_defaults

__all__ = ["ConfigReport", "Setting", "config_report", "mask_secret"]

#: settings whose values are secrets
SECRETS = frozenset({"model.api_key", "delegation.api_key"})
#: settings that are endpoints (shown without credentials)
URLS = frozenset({"model.base_url", "delegation.base_url"})
#: a key shorter than this is only ever shown as ``(set)``
_MASK_MIN_CHARS = 16


@dataclass(frozen=True)
class Setting:
    key: str  # section.name
    value: Any  # as JSON would hold it; secrets already masked
    source: str  # default | config.yaml | env NAME


@dataclass(frozen=True)
class ConfigReport:
    config: Config
    settings: list[Setting]
    #: settings.turn_defaults: what a turn that names nothing runs with
    turn_defaults: dict[str, str | None]


def mask_secret(value: str | None) -> str | None:
    """``sk-…abcd`` for a long key (its usual ``xx-`` prefix and last four characters),
    ``(set)`` for a short one, None for none."""
    if not value:
        return None
    if len(value) < _MASK_MIN_CHARS:
        return "(set)"
    head = value.split("-", 1)[0]
    prefix = head + "-" if "-" in value and len(head) <= 3 and head.isalpha() else ""
    return f"{prefix}…{value[-4:]}"


def _source(section: str, key: str, raw: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """Where ``section.key`` came from, by the rules of config.build_config."""
    written = isinstance(raw.get(section), dict) and key in raw[section]
    if section == "model":
        if key == "base_url" and env.get("OPENAI_BASE_URL"):
            return "env OPENAI_BASE_URL"
        if key == "api_key" and env.get("OPENAI_API_KEY"):
            return "env OPENAI_API_KEY"
        if key == "provider" and not written and env.get("OPENAI_BASE_URL"):
            return "env OPENAI_BASE_URL"
    return "config.yaml" if written else "default"


def _shown(key: str, value: Any) -> Any:
    if key in SECRETS:
        return mask_secret(value)
    if key in URLS and isinstance(value, str):
        return shown_url(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def config_report(path: Path, env: Mapping[str, str]) -> ConfigReport:
    """The effective configuration of config.yaml at ``path`` under ``env``; raises
    ``ConfigError`` exactly when the owner would refuse to start with it."""
    raw = read_config_file(path)
    from .store import STORE_ENV, StoreConfig, load_store_config
    from .store import shown_url as db_url

    errors: list[str] = []
    try:
        config = build_config(raw, dict(env))
    except ConfigError as exc:
        errors += exc.errors
    try:  # where the state is kept (store_config.py): config.yaml, then TETHER_STORE
        store = load_store_config(path, env=dict(env))
    except ConfigError as exc:
        errors += exc.errors
    if errors:  # every problem at once, not one per run
        raise ConfigError("\n".join(errors), errors)
    settings = []
    for server in config.mcp.servers:  # env values and headers may be secrets: names only
        shown = {"command": " ".join((server.command or "", *server.args)).strip() or None,
                 "url": shown_url(server.url) if server.url else None,
                 "env": [k for k, _ in server.env] or None,
                 "headers": [k for k, _ in server.headers] or None,
                 "enabled": server.enabled, "timeout_seconds": server.timeout_seconds,
                 "sandbox": server.sandbox if server.command else None,
                 "network": server.network if server.command else None,
                 "tools": {"allow": list(server.tools_allow), "deny": list(server.tools_deny)}}
        settings.append(Setting(f"mcp.servers.{server.name}",
                                {k: v for k, v in shown.items() if v is not None},
                                "config.yaml"))
    for section in fields(Config):
        if section.name == "mcp":
            continue
        values = getattr(config, section.name)
        for f in fields(values):
            settings.append(Setting(f"{section.name}.{f.name}",
                                    _shown(f"{section.name}.{f.name}", getattr(values, f.name)),
                                    _source(section.name, f.name, raw, env)))
    written = raw.get("store")
    given: dict[str, Any] = written if isinstance(written, dict) else {}
    for key in (f.name for f in fields(StoreConfig)):
        value = getattr(store, key)
        source = (f"env {STORE_ENV}" if key == "url" and env.get(STORE_ENV)
                  else "config.yaml" if key in given else "default")
        if key == "url":
            value = db_url(value) if value else None
        settings.append(Setting(f"store.{key}", value, source))
    return ConfigReport(config, settings, turn_defaults(config))
