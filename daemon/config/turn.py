"""Per-turn settings: turn params > session defaults > environment/config > built-ins.

The environment is folded into ``Config`` at load time (config.py), so here the
order is simply turn options, then the session's stored options, then config.
API keys never come from the wire: they are taken from config/environment, and
go only to the configured endpoint (never to a base_url sent on the wire).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tether.rpc.errors import InvalidParams
from tether.rpc.names import PROVIDER_NAMES, TOOLSETS

from .core import SANDBOX_MODES, Config
from .values import OPENAI_BASE_URL, base_url_problem

__all__ = ["TurnSettings", "resolve_turn", "resolve_child", "ResolveError",
           "check_turn_options", "endpoint", "turn_defaults", "shown_url", "TOOLSETS",
           "DEFAULT_TOOLSETS"]

DEMO_MODEL = "tether-demo"
#: the toolsets of a session that names none: all of them (SPEC §12)
DEFAULT_TOOLSETS: tuple[str, ...] = TOOLSETS

class ResolveError(Exception):
    """The turn's settings cannot work (e.g. provider custom without base_url)."""


@dataclass(frozen=True)
class TurnSettings:
    provider: str
    base_url: str | None
    model: str
    api_key: str | None
    toolsets: tuple[str, ...]
    reasoning: str | None
    max_turns: int
    ignore_rules: bool
    #: the sandbox mode the turn asked for (None: the configured one); never looser
    #: than sandbox.mode (toolsets/sandbox.py clamps it)
    sandbox: str | None = None


def check_turn_options(provider: str | None, toolsets: list[str] | None,
                       base_url: str | None = None, sandbox: str | None = None,
                       configured_sandbox: str = "workspace-write") -> None:
    """Refuse, at session.create / prompt.submit, options no turn could run with.

    Caught here, a typo is an ``invalid_params`` the user sees at once, with
    nothing recorded; caught when the turn runs, it would be a failed turn, and
    for a session default, every turn of that session failing.
    """
    if provider is not None and provider not in PROVIDER_NAMES:
        raise InvalidParams(f"unknown provider {provider!r}; valid: {', '.join(PROVIDER_NAMES)}",
                            fields=[{"loc": "provider", "msg": "unknown provider",
                                     "type": "value_error"}])
    if toolsets is not None and (bad := [t for t in toolsets if t not in TOOLSETS]):
        raise InvalidParams(f"unknown toolsets: {', '.join(bad)}",
                            fields=[{"loc": "toolsets", "msg": "unknown toolset",
                                     "type": "value_error"}])
    if base_url is not None and (why := base_url_problem(base_url)):
        raise InvalidParams(f"base_url {base_url[:100]!r} {why}",
                            fields=[{"loc": "base_url", "msg": why, "type": "value_error"}])
    if sandbox is not None and SANDBOX_MODES.index(sandbox) < \
            SANDBOX_MODES.index(configured_sandbox):
        why = (f"sandbox {sandbox} is looser than the owner's sandbox.mode "
               f"{configured_sandbox}; a turn may only make it stricter "
               f"({' < '.join(SANDBOX_MODES)})")
        raise InvalidParams(why, fields=[{"loc": "sandbox", "msg": "looser than sandbox.mode",
                                          "type": "value_error"}])


def _pick(key: str, *layers: dict[str, Any]) -> Any:
    for layer in layers:
        value = layer.get(key)
        if value is not None:
            return value
    return None


def endpoint(provider: str | None, base_url: str | None) -> str | None:
    """Where a provider's requests go (None: nowhere, the offline demo)."""
    if provider == "demo":
        return None
    if provider == "openai":
        base_url = base_url or OPENAI_BASE_URL
    return base_url.rstrip("/") if base_url else None


def resolve_turn(config: Config, session_options: dict[str, Any],
                 turn_options: dict[str, Any]) -> TurnSettings:
    m = config.model
    wire_url = _pick("base_url", turn_options, session_options)
    # a base_url sent with no provider means that endpoint: the demo, the only
    # provider that takes no URL, gives way to custom (as with OPENAI_BASE_URL)
    provider = _pick("provider", turn_options, session_options) or (
        "custom" if wire_url and m.provider == "demo" else m.provider)
    if provider not in PROVIDER_NAMES:
        raise ResolveError(f"unknown provider {provider!r}; valid: {', '.join(PROVIDER_NAMES)}")
    same_as_config = provider == m.provider
    base_url = wire_url or (m.base_url if same_as_config or provider == "custom" else None)
    # The configured key belongs to the configured endpoint: a request that goes
    # anywhere else (a base_url a client chose, or another provider's default URL:
    # any client, a TCP token holder too, can ask for either) never carries it.
    own_endpoint = endpoint(provider, base_url) == endpoint(m.provider, m.base_url)
    model = _pick("model", turn_options, session_options) or m.default
    if model is None:
        model = DEMO_MODEL if provider == "demo" else "gpt-4o-mini"
    toolsets = _pick("toolsets", turn_options, session_options)
    if provider == "openai" and endpoint(provider, base_url) == OPENAI_BASE_URL.rstrip("/") \
            and not (own_endpoint and m.api_key):
        raise ResolveError("provider openai needs an API key and none is configured for it: "
                           "set OPENAI_API_KEY (or model.api_key with model.provider openai) "
                           "and restart the owner")
    return TurnSettings(
        provider=provider,
        base_url=base_url,
        model=model,
        api_key=m.api_key if own_endpoint else None,
        toolsets=tuple(DEFAULT_TOOLSETS if toolsets is None else toolsets),
        reasoning=_pick("reasoning", turn_options, session_options),
        max_turns=_pick("max_turns", turn_options, session_options) or config.daemon.max_turns,
        ignore_rules=bool(_pick("ignore_rules", turn_options, session_options)),
        sandbox=_pick("sandbox", turn_options, session_options),
    )


def shown_url(url: str) -> str:
    """``url`` as it may be shown or sent to a client: without user, password or query
    (where an endpoint's credentials could be written)."""
    import httpx

    try:
        return str(httpx.URL(url).copy_with(username=None, password=None, query=None))
    except (httpx.InvalidURL, ValueError):
        return "(not a valid URL)"


def turn_defaults(config: Config) -> dict[str, str | None]:
    """The provider, model and endpoint of a turn that names none: what
    runtime.describe reports (`tether status`) and `tether config check` prints."""
    s = resolve_turn(config, {}, {})
    url = endpoint(s.provider, s.base_url)
    return {"provider": s.provider, "model": s.model, "base_url": shown_url(url) if url else None}


def resolve_child(config: Config, parent: TurnSettings, toolsets: tuple[str, ...]) -> TurnSettings:
    """A child agent's settings: delegation.* config where set, else the parent's.

    The parent's API key goes only to the parent's own endpoint: a child sent to
    another provider or base_url uses ``delegation.api_key`` or none at all.
    """
    d = config.delegation
    provider = d.provider or parent.provider
    base_url = d.base_url or (parent.base_url if provider == parent.provider else None)
    same_endpoint = provider == parent.provider and base_url == parent.base_url
    return TurnSettings(
        provider=provider,
        base_url=base_url,
        model=d.model or parent.model,
        api_key=d.api_key or (parent.api_key if same_endpoint else None),
        toolsets=toolsets,
        reasoning=parent.reasoning,
        max_turns=min(parent.max_turns, d.child_max_turns),
        ignore_rules=parent.ignore_rules,
        sandbox=parent.sandbox,
    )
