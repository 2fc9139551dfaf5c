"""Configuration: ``<home>/config.yaml`` + environment → one immutable Config.

Precedence (SPEC §9): per-turn/session params > environment (OPENAI_BASE_URL,
OPENAI_API_KEY, TETHER_HOME) > config.yaml > defaults. Every limit lives here
with a finite default; docs/configuration.md lists them all. API keys are held
in memory only and are excluded from ``repr``.
"""

from __future__ import annotations

import os
import re
from dataclasses import field, replace
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, NotRequired

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    TypeAdapter,
    ValidationError,
)
from pydantic.dataclasses import dataclass
from typing_extensions import TypedDict

from tether.rpc.names import PROVIDER_NAMES
from tether.rpc.protocol import MAX_TEXT_CHARS

from .errors import ConfigError, one_of, problems
from .mcp import McpConfig, McpServerConfig, mcp_server
from .scalars import AtLeastOne, Bool, Count, Number, Positive, Str, Strs
from .values import normalise_mode

__all__ = ["Config", "ModelConfig", "DelegationConfig", "DaemonConfig", "CronConfig", "HttpConfig",
           "ApprovalsConfig", "ToolsConfig", "SandboxConfig", "SANDBOX_MODES", "ConfigError",
           "load_config", "read_config_file", "build_config", "McpConfig", "McpServerConfig",
           "mcp_server"]


#: the smallest daemon.max_db_bytes accepted: room for the schema and a little more
MIN_DB_BYTES = 256 * 1024

#: every section: unknown keys are refused (a misspelled key silently ignored is a
#: setting the user thinks they made)
_SECTION = ConfigDict(extra="forbid")


def _stream(value: Any) -> Any:
    if (mode := normalise_mode(value)) is None:
        raise ValueError(f"must be auto, true or false, not {value!r}")
    return mode


Provider = Annotated[Str, AfterValidator(one_of(*PROVIDER_NAMES))]


class ModelPrice(TypedDict):
    """USD per million tokens."""

    __pydantic_config__ = _SECTION  # type: ignore[misc]
    input: Annotated[float, Strict(), Field(ge=0)]
    output: Annotated[float, Strict(), Field(ge=0)]
    cached_input: NotRequired[Annotated[float, Strict(), Field(ge=0)]]


@dataclass(frozen=True, config=_SECTION)
class ModelConfig:
    provider: Provider = "demo"
    base_url: Str | None = None
    default: Str | None = None
    api_key: Str | None = field(default=None, repr=False)
    # auto | true | false (stream_mode.py): auto streams, and asks an endpoint that
    # cannot stream without it
    stream: Annotated[str, BeforeValidator(_stream)] = "auto"
    connect_timeout_seconds: Positive = 10.0
    timeout_seconds: Positive = 120.0
    # the whole of one model request, retries included (timeout_seconds bounds silence only)
    request_timeout_seconds: Positive = 600.0
    max_retries: Count = 2
    retry_backoff_seconds: Number = 0.5
    # long sessions (docs/long-sessions.md): the model's context window in tokens
    # (None: the price table's figure for the model, else DEFAULT_CONTEXT_WINDOW),
    # the share of it a request may fill before older turns are summarised, and
    # when that happens: auto, manual (/compact only) or off
    context_window: Annotated[int, Strict(), Field(ge=256, description="tokens")] | None = None
    compact_at: Annotated[float, Strict(), Field(
        ge=0.1, le=1.0, description="a share of the context window")] = 0.8
    compact: Literal["auto", "manual", "off"] = "auto"
    # USD per million tokens by model name: {MODEL: {input, output, cached_input}}
    prices: dict[Str, ModelPrice] = field(default_factory=dict)


@dataclass(frozen=True, config=_SECTION)
class DelegationConfig:
    max_concurrent_children: Count = 3
    # children running at once across the whole owner, per delegation depth
    max_running_children: Count = 16
    max_depth: Count = 1
    max_tasks: Count = 8
    child_max_turns: AtLeastOne = 20
    provider: Provider | None = None
    base_url: Str | None = None
    model: Str | None = None
    api_key: Str | None = field(default=None, repr=False)


@dataclass(frozen=True, config=_SECTION)
class DaemonConfig:
    max_connections: AtLeastOne = 256
    max_running_turns: AtLeastOne = 16
    grace_seconds: Number = 10.0
    max_frame_bytes: Count = 4 * 1024 * 1024
    max_queued_per_session: Count = 64
    max_subscriptions_per_connection: Count = 256
    viewer_queue_events: Count = 1024
    # above the protocol's ceiling, a text between the two would be refused by
    # validation in other words than this limit's (docs/configuration.md)
    max_text_chars: Annotated[int, Strict(), Field(
        ge=1, le=MAX_TEXT_CHARS, description="the protocol's ceiling on one text")] = 200_000
    max_turns: AtLeastOne = 30
    # what to do with admissions found `unknown` after a crash: "manual" waits
    # for prompt.resolve_unknown; "interrupt" settles them at once
    unknown_policy: Literal["manual", "interrupt"] = "manual"
    tcp_allow_remote: Bool = False
    tcp_allowed_origins: Strs = ()
    busy_timeout_ms: Count = 5000
    # quota on state.db (PRAGMA max_page_count on the writer); None = the disk's size.
    # At the quota writes fail as on a full disk: storage_unavailable / disk_full.
    max_db_bytes: Annotated[int, Strict(), Field(ge=MIN_DB_BYTES)] | None = None


@dataclass(frozen=True, config=_SECTION)
class ApprovalsConfig:
    """What a tool call may do without asking (daemon/approvals/policy.py)."""

    mode: Literal["ask", "auto", "never"] = "ask"
    unattended: Literal["deny", "allow"] = "deny"  # finite turns and child agents
    allow: Strs = ()  # command patterns, or path:GLOB for file writes
    deny: Strs = ()
    timeout_seconds: Positive = 300.0


@dataclass(frozen=True, config=_SECTION)
class ToolsConfig:
    """Limits of the terminal and file tools (docs/tools.md)."""

    command_timeout_seconds: Positive = 120.0
    max_command_timeout_seconds: Number = 3600.0
    # of a command's output shown to the model
    output_chars: Annotated[int, Strict(), Field(ge=1000)] = 20_000
    read_lines: Count = 2000  # lines read_file returns at most
    read_chars: Count = 100_000
    max_processes: AtLeastOne = 64  # background processes running at once
    # output kept per background process
    process_ring_bytes: Annotated[int, Strict(), Field(ge=1000)] = 200_000
    # how long a file tool waits for an editor that offered to read/write (fs.offer)
    editor_fs_timeout_seconds: Annotated[float, Strict(), Field(gt=0, le=60)] = 5.0


#: sandbox.mode values, loosest first (a turn may ask for a stricter one only)
SANDBOX_MODES: tuple[str, ...] = ("off", "workspace-write", "read-only")
#: what sandbox.env_allow may name: a variable, or a prefix ending in ``*``
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?")


def _env_names(names: tuple[str, ...]) -> tuple[str, ...]:
    if bad := [n for n in names if not _ENV_NAME.fullmatch(n)]:
        raise ValueError(f"takes variable names (or a prefix ending in *), not {bad[0]!r}")
    return names


@dataclass(frozen=True, config=_SECTION)
class SandboxConfig:
    """The operating-system boundary around the agent's commands (docs/tools.md)."""

    # YAML reads a bare `off` as false: it means the mode named off
    mode: Annotated[Literal["workspace-write", "read-only", "off"],
                    BeforeValidator(lambda v: "off" if v is False else v)] = "workspace-write"
    network: Bool = False  # commands in the sandbox may use the network
    # more variables a command sees (NAME or PREFIX_*)
    env_allow: Annotated[Strs, AfterValidator(_env_names)] = ()


def _zone(name: str) -> str:
    from zoneinfo import ZoneInfo

    try:
        ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        raise ValueError(f"{name!r} is not an IANA time zone") from None
    return name


@dataclass(frozen=True, config=_SECTION)
class CronConfig:
    # false: jobs can be managed and run by hand, but nothing fires on schedule
    enabled: Bool = True
    # the zone of jobs created without --tz; None = the owner's local zone
    timezone: Annotated[Str, AfterValidator(_zone)] | None = None
    max_jobs: AtLeastOne = 256
    # run history kept per job (older run rows are deleted; their sessions stay)
    max_runs_kept: AtLeastOne = 1000


@dataclass(frozen=True, config=_SECTION)
class HttpConfig:
    """The HTTP endpoint on the TCP listener (docs/http.md)."""

    max_concurrent_requests: AtLeastOne = 8
    max_body_bytes: Count = 4 * 1024 * 1024
    keepalive_seconds: Positive = 10.0
    retry_after_seconds: Count = 1
    models: Strs = ()
    #: a request's body must be in by then, before it takes an in-flight slot
    body_timeout_seconds: Positive = 10.0
    #: how long after a first attempt an SDK's retry of it (same token, same body,
    #: ``x-stainless-retry-count`` > 0) is attached to it instead of run again
    retry_window_seconds: Positive = 600.0
    #: how long the turn of an SDK client that went away waits for a retry to
    #: claim it before it is cancelled
    retry_claim_seconds: Positive = 30.0


@dataclass(frozen=True, config=_SECTION)
class Config:
    #: top-level sections read by other parts of the owner (SPEC §12), not by Config:
    #: known here so that naming them is not an unknown-key error; their own loaders
    #: check their keys
    OTHER_SECTIONS: ClassVar[tuple[str, ...]] = ("store",)

    model: ModelConfig = ModelConfig()
    delegation: DelegationConfig = DelegationConfig()
    daemon: DaemonConfig = DaemonConfig()
    approvals: ApprovalsConfig = ApprovalsConfig()
    tools: ToolsConfig = ToolsConfig()
    sandbox: SandboxConfig = SandboxConfig()
    cron: CronConfig = CronConfig()
    http: HttpConfig = HttpConfig()
    mcp: McpConfig = McpConfig()


_CONFIG = TypeAdapter(Config)


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
    per setting. Raises ConfigError naming every bad key and value at once."""
    env = dict(os.environ) if env is None else env
    # an empty section (`model:` alone) is its defaults; other sections' loaders read theirs
    given = {k: v for k, v in raw.items() if v is not None and k not in Config.OTHER_SECTIONS}
    errors: list[str] = []
    try:
        config = _CONFIG.validate_python(given)
    except ValidationError as exc:
        errors += problems(exc, Config, given)
        try:  # the model section alone, for the checks below
            config = _CONFIG.validate_python({"model": given.get("model") or {}})
        except ValidationError:
            config = Config()
    model = config.model
    if env.get("OPENAI_BASE_URL"):
        model = replace(model, base_url=env["OPENAI_BASE_URL"])
        if "provider" not in (raw.get("model") or {}):
            # a base URL in the environment and no provider chosen: use it
            model = replace(model, provider="custom")
    if env.get("OPENAI_API_KEY"):
        model = replace(model, api_key=env["OPENAI_API_KEY"])
    from .values import base_url_problem

    for name, section in (("model", model), ("delegation", config.delegation)):
        if section.base_url is not None and (why := base_url_problem(section.base_url)):
            source = ("OPENAI_BASE_URL" if name == "model" and env.get("OPENAI_BASE_URL")
                      else f"config.yaml: `{name}.base_url`")
            errors.append(f"{source} {section.base_url!r} {why}")
    if model.provider == "openai" and not model.api_key:
        errors.append("config.yaml: `model.provider` is openai but no API key is set: "
                      "set OPENAI_API_KEY or `model.api_key` (or use provider custom "
                      "for an endpoint that needs none)")
    if errors:
        raise ConfigError("\n".join(errors), errors)
    return replace(config, model=model)
