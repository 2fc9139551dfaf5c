"""Configuration: ``<home>/config.yaml`` + environment → one immutable Config.

Precedence (SPEC §9): per-turn/session params > environment (OPENAI_BASE_URL,
OPENAI_API_KEY, TETHER_HOME) > config.yaml > defaults. Every limit lives here
with a finite default; docs/configuration.md lists them all. API keys are held
in memory only and are excluded from ``repr``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .mcp import ConfigError, McpConfig, McpServerConfig, _unknown, mcp_server, parse_mcp

__all__ = ["Config", "ModelConfig", "DelegationConfig", "DaemonConfig", "CronConfig", "HttpConfig",
           "ApprovalsConfig", "ToolsConfig", "SandboxConfig", "SANDBOX_MODES", "ConfigError",
           "load_config", "read_config_file", "build_config", "McpConfig", "McpServerConfig",
           "mcp_server"]


#: the smallest daemon.max_db_bytes accepted: room for the schema and a little more
MIN_DB_BYTES = 256 * 1024


@dataclass(frozen=True)
class ModelConfig:
    provider: str = "demo"
    base_url: str | None = None
    default: str | None = None
    api_key: str | None = field(default=None, repr=False)
    # auto | true | false (stream_mode.py): auto streams, and asks an endpoint that
    # cannot stream without it
    stream: str = "auto"
    connect_timeout_seconds: float = 10.0
    timeout_seconds: float = 120.0
    # the whole of one model request, retries included (timeout_seconds bounds silence only)
    request_timeout_seconds: float = 600.0
    max_retries: int = 2
    retry_backoff_seconds: float = 0.5
    # long sessions (docs/long-sessions.md): the model's context window in tokens
    # (None: the price table's figure for the model, else DEFAULT_CONTEXT_WINDOW),
    # the share of it a request may fill before older turns are summarised, and
    # when that happens: auto, manual (/compact only) or off
    context_window: int | None = None
    compact_at: float = 0.8
    compact: str = "auto"
    # USD per million tokens by model name: {MODEL: {input, output, cached_input}}
    prices: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class DelegationConfig:
    max_concurrent_children: int = 3
    # children running at once across the whole owner, per delegation depth
    max_running_children: int = 16
    max_depth: int = 1
    max_tasks: int = 8
    child_max_turns: int = 20
    provider: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class DaemonConfig:
    max_connections: int = 256
    max_running_turns: int = 16
    grace_seconds: float = 10.0
    max_frame_bytes: int = 4 * 1024 * 1024
    max_queued_per_session: int = 64
    max_subscriptions_per_connection: int = 256
    viewer_queue_events: int = 1024
    max_text_chars: int = 200_000
    max_turns: int = 30
    # what to do with admissions found `unknown` after a crash: "manual" waits
    # for prompt.resolve_unknown; "interrupt" settles them at once
    unknown_policy: str = "manual"
    tcp_allow_remote: bool = False
    tcp_allowed_origins: tuple[str, ...] = ()
    busy_timeout_ms: int = 5000
    # quota on state.db (PRAGMA max_page_count on the writer); None = the disk's size.
    # At the quota writes fail as on a full disk: storage_unavailable / disk_full.
    max_db_bytes: int | None = None


@dataclass(frozen=True)
class ApprovalsConfig:
    """What a tool call may do without asking (daemon/approvals/policy.py)."""

    mode: str = "ask"  # ask | auto | never
    unattended: str = "deny"  # deny | allow: finite turns and child agents
    allow: tuple[str, ...] = ()  # command patterns, or path:GLOB for file writes
    deny: tuple[str, ...] = ()
    timeout_seconds: float = 300.0


@dataclass(frozen=True)
class ToolsConfig:
    """Limits of the terminal and file tools (docs/tools.md)."""

    command_timeout_seconds: float = 120.0
    max_command_timeout_seconds: float = 3600.0
    output_chars: int = 20_000  # of a command's output shown to the model
    read_lines: int = 2000  # lines read_file returns at most
    read_chars: int = 100_000
    max_processes: int = 64  # background processes running at once
    process_ring_bytes: int = 200_000  # output kept per background process


#: sandbox.mode values, loosest first (a turn may ask for a stricter one only)
SANDBOX_MODES: tuple[str, ...] = ("off", "workspace-write", "read-only")
#: what sandbox.env_allow may name: a variable, or a prefix ending in ``*``
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?")


@dataclass(frozen=True)
class SandboxConfig:
    """The operating-system boundary around the agent's commands (docs/tools.md)."""

    mode: str = "workspace-write"  # workspace-write | read-only | off
    network: bool = False  # commands in the sandbox may use the network
    env_allow: tuple[str, ...] = ()  # more variables a command sees (NAME or PREFIX_*)


@dataclass(frozen=True)
class CronConfig:
    # false: jobs can be managed and run by hand, but nothing fires on schedule
    enabled: bool = True
    # the zone of jobs created without --tz; None = the owner's local zone
    timezone: str | None = None
    max_jobs: int = 256
    # run history kept per job (older run rows are deleted; their sessions stay)
    max_runs_kept: int = 1000


@dataclass(frozen=True)
class HttpConfig:
    """The HTTP endpoint on the TCP listener (docs/http.md)."""

    max_concurrent_requests: int = 8
    max_body_bytes: int = 4 * 1024 * 1024
    keepalive_seconds: float = 10.0
    retry_after_seconds: int = 1
    models: tuple[str, ...] = ()
    #: a request's body must be in by then, before it takes an in-flight slot
    body_timeout_seconds: float = 10.0
    #: how long after a first attempt an SDK's retry of it (same token, same body,
    #: ``x-stainless-retry-count`` > 0) is attached to it instead of run again
    retry_window_seconds: float = 600.0
    #: how long the turn of an SDK client that went away waits for a retry to
    #: claim it before it is cancelled
    retry_claim_seconds: float = 30.0


@dataclass(frozen=True)
class Config:
    model: ModelConfig = ModelConfig()
    delegation: DelegationConfig = DelegationConfig()
    daemon: DaemonConfig = DaemonConfig()
    approvals: ApprovalsConfig = ApprovalsConfig()
    tools: ToolsConfig = ToolsConfig()
    sandbox: SandboxConfig = SandboxConfig()
    cron: CronConfig = CronConfig()
    http: HttpConfig = HttpConfig()
    mcp: McpConfig = McpConfig()


#: top-level sections read by other parts of the owner (SPEC §12), not by Config:
#: known here so that naming them is not an unknown-key error; their own loaders
#: check their keys
OTHER_SECTIONS: tuple[str, ...] = ("approvals", "store")

def _section(cls: type, raw: Any, name: str, errors: list[str]) -> Any:
    """The section's values; each bad key or value is added to ``errors`` (and
    left at its default)."""
    if raw is None:
        return cls()
    if not isinstance(raw, dict):
        errors.append(f"config.yaml: `{name}` must be a mapping")
        return cls()
    known = {f.name: f for f in fields(cls)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in known:
            # a misspelled key silently ignored is a setting the user thinks they made
            errors.append(str(_unknown(key, list(known), f"{name}.")))
            continue
        default = getattr(cls(), key)
        if cls is ModelConfig and key == "stream":
            from .values import normalise_mode

            if (mode := normalise_mode(value)) is None:
                errors.append(f"config.yaml: `model.stream` must be auto, true or false, "
                          f"not {value!r}")
            else:
                values[key] = mode
            continue
        if known[key].type == "int | None":  # an optional limit: null means "no limit"
            ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
        elif isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            value = float(value) if ok else value
        elif isinstance(default, tuple):
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
            value = tuple(value) if ok else value
        else:
            ok = value is None or isinstance(value, str)
        if not ok:
            errors.append(f"config.yaml: `{name}.{key}` has the wrong type ({value!r})")
            continue
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            errors.append(f"config.yaml: `{name}.{key}` must not be negative")
            continue
        values[key] = value
    return cls(**values)


def _prices(raw: Any) -> dict[str, dict[str, float]]:
    """``model.prices``: {MODEL: {input, output, cached_input?}}, USD per million tokens."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError("config.yaml: `model.prices` must be a mapping of model names to "
                          "{input, output, cached_input}")
    out: dict[str, dict[str, float]] = {}
    for name, price in raw.items():
        where = f"config.yaml: `model.prices.{name}`"
        if not isinstance(price, dict):
            raise ConfigError(f"{where} must be a mapping {{input, output, cached_input}}")
        for key in price:
            if key not in ("input", "output", "cached_input"):
                raise _unknown(key, ["input", "output", "cached_input"], f"model.prices.{name}.")
        for key in ("input", "output"):
            if key not in price:
                raise ConfigError(f"{where} needs `{key}` (USD per million tokens)")
        for key, value in price.items():
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{where}.{key} must be a number of USD per million "
                                  f"tokens, not {value!r}")
        out[str(name)] = {k: float(v) for k, v in price.items()}
    return out


def load_config(path: Path | None, env: dict[str, str] | None = None) -> Config:
    """Read config.yaml (missing file = defaults) and apply the environment."""
    return build_config(read_config_file(path), env)


def read_config_file(path: Path | None) -> dict[str, Any]:
    """config.yaml's top-level mapping as written ({} when there is no file)."""
    raw: dict[str, Any] = {}
    if path is not None and path.is_symlink() and not path.exists():
        raise ConfigError(f"{path} is a symlink to {os.readlink(path)}, which does not exist; "
                          "fix or remove the link (without a config.yaml the owner runs the "
                          "offline demo)")
    if path is not None and path.exists():
        import yaml

        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            # one line: it is what a client that started the owner shows
            raise ConfigError(f"cannot read {path}: {' '.join(str(exc).split())}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: top level must be a mapping")
        raw = loaded or {}
    return raw


def build_config(raw: dict[str, Any], env: dict[str, str] | None = None) -> Config:
    """The Config of config.yaml's mapping ``raw`` with the environment applied: the
    environment wins over the file for OPENAI_BASE_URL (which also makes the provider
    `custom` when the file names none) and OPENAI_API_KEY; config_report.py says so
    per setting."""
    env = dict(os.environ) if env is None else env
    errors: list[str] = []
    sections = [f.name for f in fields(Config)] + list(OTHER_SECTIONS)
    for key in raw:
        if key not in sections:
            errors.append(str(_unknown(key, sections, "")))
    raw_model = raw.get("model")
    prices: dict[str, dict[str, float]] = {}
    if isinstance(raw_model, dict):
        try:
            prices = _prices(raw_model.get("prices"))
        except ConfigError as exc:
            errors.append(str(exc))
        raw_model = {k: v for k, v in raw_model.items() if k != "prices"}
    model = replace(_section(ModelConfig, raw_model, "model", errors), prices=prices)
    delegation = _section(DelegationConfig, raw.get("delegation"), "delegation", errors)
    daemon = _section(DaemonConfig, raw.get("daemon"), "daemon", errors)
    approvals = _section(ApprovalsConfig, raw.get("approvals"), "approvals", errors)
    tools = _section(ToolsConfig, raw.get("tools"), "tools", errors)
    raw_sandbox = raw.get("sandbox")
    if isinstance(raw_sandbox, dict) and raw_sandbox.get("mode") is False:
        # YAML reads a bare `off` as false: it means the mode named off
        raw_sandbox = {**raw_sandbox, "mode": "off"}
    sandbox = _section(SandboxConfig, raw_sandbox, "sandbox", errors)
    cron = _section(CronConfig, raw.get("cron"), "cron", errors)
    http = _section(HttpConfig, raw.get("http"), "http", errors)
    try:
        mcp = parse_mcp(raw.get("mcp"))
    except ConfigError as exc:
        errors += exc.errors
        mcp = McpConfig()
    if http.max_concurrent_requests < 1 or http.keepalive_seconds <= 0:
        errors.append("config.yaml: `http.max_concurrent_requests` must be at least 1 "
                      "and `http.keepalive_seconds` more than 0")
    if min(http.body_timeout_seconds, http.retry_window_seconds,
           http.retry_claim_seconds) <= 0:
        errors.append("config.yaml: `http.body_timeout_seconds`, "
                      "`http.retry_window_seconds` and `http.retry_claim_seconds` "
                      "must be more than 0")
    if env.get("OPENAI_BASE_URL"):
        model = replace(model, base_url=env["OPENAI_BASE_URL"])
        if "provider" not in (raw.get("model") or {}):
            # a base URL in the environment and no provider chosen: use it
            model = replace(model, provider="custom")
    if env.get("OPENAI_API_KEY"):
        model = replace(model, api_key=env["OPENAI_API_KEY"])
    from tether.rpc.names import PROVIDER_NAMES
    from tether.rpc.protocol import MAX_TEXT_CHARS

    from .values import base_url_problem

    for name, section in (("model", model), ("delegation", delegation)):
        if section.provider is not None and section.provider not in PROVIDER_NAMES:
            errors.append(f"config.yaml: `{name}.provider` must be one of "
                          f"{', '.join(PROVIDER_NAMES)}, not {section.provider!r}")
        if section.base_url is not None and (why := base_url_problem(section.base_url)):
            source = ("OPENAI_BASE_URL" if name == "model" and env.get("OPENAI_BASE_URL")
                      else f"config.yaml: `{name}.base_url`")
            errors.append(f"{source} {section.base_url!r} {why}")
    if model.provider == "openai" and not model.api_key:
        errors.append("config.yaml: `model.provider` is openai but no API key is set: "
                      "set OPENAI_API_KEY or `model.api_key` (or use provider custom "
                      "for an endpoint that needs none)")
    if model.compact not in ("auto", "manual", "off"):
        errors.append("config.yaml: `model.compact` must be auto, manual or off")
    if not 0.1 <= model.compact_at <= 1.0:
        errors.append("config.yaml: `model.compact_at` must be from 0.1 to 1.0 (a share "
                      "of the context window)")
    if model.context_window is not None and model.context_window < 256:
        errors.append("config.yaml: `model.context_window` must be at least 256 tokens")
    for key in ("connect_timeout_seconds", "timeout_seconds", "request_timeout_seconds"):
        if not getattr(model, key) > 0:
            errors.append(f"config.yaml: `model.{key}` must be more than 0")
    if daemon.max_turns < 1 or delegation.child_max_turns < 1:
        errors.append("config.yaml: `daemon.max_turns` and `delegation.child_max_turns` "
                      "must be at least 1")
    if daemon.unknown_policy not in ("manual", "interrupt"):
        errors.append("config.yaml: `daemon.unknown_policy` must be manual or interrupt")
    if daemon.max_running_turns < 1 or daemon.max_connections < 1:
        errors.append("config.yaml: daemon limits must be at least 1")
    if not 1 <= daemon.max_text_chars <= MAX_TEXT_CHARS:
        # above the protocol's ceiling, a text between the two would be refused by
        # validation in other words than this limit's (docs/configuration.md)
        errors.append(f"config.yaml: `daemon.max_text_chars` must be from 1 to "
                      f"{MAX_TEXT_CHARS} (the protocol's ceiling on one text)")
    if daemon.max_db_bytes is not None and daemon.max_db_bytes < MIN_DB_BYTES:
        errors.append(f"config.yaml: `daemon.max_db_bytes` must be at least {MIN_DB_BYTES}")
    if cron.timezone is not None:
        from zoneinfo import ZoneInfo

        try:
            ZoneInfo(cron.timezone)
        except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
            errors.append(f"config.yaml: `cron.timezone` {cron.timezone!r} is not an "
                          "IANA time zone")
    if cron.max_jobs < 1 or cron.max_runs_kept < 1:
        errors.append("config.yaml: `cron.max_jobs` and `cron.max_runs_kept` must be at "
                      "least 1")
    if approvals.mode not in ("ask", "auto", "never"):
        errors.append("config.yaml: `approvals.mode` must be ask, auto or never")
    if approvals.unattended not in ("deny", "allow"):
        errors.append("config.yaml: `approvals.unattended` must be deny or allow")
    if not approvals.timeout_seconds > 0:
        errors.append("config.yaml: `approvals.timeout_seconds` must be more than 0")
    if not tools.command_timeout_seconds > 0 or tools.max_processes < 1 \
            or tools.output_chars < 1000 or tools.process_ring_bytes < 1000:
        errors.append("config.yaml: a `tools` limit is too small (see docs/configuration.md)")
    if sandbox.mode not in SANDBOX_MODES:
        errors.append("config.yaml: `sandbox.mode` must be workspace-write, read-only or off")
    if bad := [n for n in sandbox.env_allow if not _ENV_NAME.fullmatch(n)]:
        errors.append(f"config.yaml: `sandbox.env_allow` takes variable names (or a "
                      f"prefix ending in *), not {bad[0]!r}")
    if errors:
        raise ConfigError("\n".join(errors), errors)
    return Config(model=model, delegation=delegation, daemon=daemon, cron=cron, http=http,
                  approvals=approvals, tools=tools, sandbox=sandbox, mcp=mcp)
