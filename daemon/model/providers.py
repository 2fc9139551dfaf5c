"""Which model client a turn talks to: provider names and settings → a `Provider`.

The owner builds one `Providers` with its httpx client, its config and the offline demo
(daemon/demo.py, which it hands in so that the model client never imports the delegation
tool the demo scripts); the agent engine asks it for the provider of each run's settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from tether.rpc.names import PROVIDER_NAMES

from ..config.core import Config
from ..config.turn import ResolveError, TurnSettings
from ..config.values import OPENAI_BASE_URL
from .provider import OpenAIProvider, Provider
from .stream_mode import StreamMemory
from .windows import ContextWindows

__all__ = ["Providers", "make_provider"]

#: HTTP providers kept for reuse, by provider, endpoint and key (a wire-chosen
#: base_url makes the set open-ended: past this many the oldest is dropped)
KEPT_PROVIDERS = 32


def make_provider(
    name: str,
    *,
    client: httpx.AsyncClient | None,
    base_url: str | None,
    api_key: str | None,
    **opts: Any,
) -> Provider:
    """Build the provider configured as ``name`` (one of `PROVIDER_NAMES`).

    ``custom`` needs ``base_url``; ``openai`` defaults it to OpenAI's API root. Both need a
    ``client``, which the caller owns. ``demo`` is offline and ignores client, URL, key and
    the HTTP options in ``opts``; `Providers` builds it, with its ``config_path``.
    """
    if name not in PROVIDER_NAMES or name == "demo":
        raise ValueError(f"unknown provider {name!r}; valid providers: {', '.join(PROVIDER_NAMES)}")
    if name == "custom" and not base_url:
        raise ValueError(
            "provider 'custom' needs a base_url (the OpenAI-style API root, "
            "e.g. http://127.0.0.1:8000/v1): set model.base_url in config.yaml or pass --base-url"
        )
    if client is None:
        raise ValueError(f"provider {name!r} needs an httpx.AsyncClient")
    return OpenAIProvider(
        client, name=name, base_url=base_url or OPENAI_BASE_URL, api_key=api_key, **opts
    )


class Providers:
    """The `Provider` for a run's settings.

    ``overrides`` replaces a provider name with a ready instance (the bench and
    in-process tests use it to run turns without a model server).
    """

    def __init__(self, config: Config, http: httpx.AsyncClient, *,
                 overrides: Mapping[str, Provider] | None = None,
                 config_path: Path | None = None,
                 demo: Callable[[Path | None], Provider] | None = None) -> None:
        self._config = config
        self._http = http
        self._overrides = dict(overrides or {})
        self._config_path = config_path
        self._demo = demo
        #: each run's context window and budget (windows.py)
        self.windows = ContextWindows(config, http)
        #: endpoints and models found unable to stream (model.stream auto), for the owner's life
        self.stream_memory = StreamMemory()
        # an OpenAIProvider holds no state of its own between requests, and building one
        # (its URL checked and parsed, its timeouts) cost each turn a few hundred µs
        self._kept: dict[tuple[str, str | None, str | None], Provider] = {}

    def for_settings(self, settings: TurnSettings) -> Provider:
        """The provider to use; ResolveError if the settings cannot make one."""
        if settings.provider in self._overrides:
            return self._overrides[settings.provider]
        if settings.provider == "demo":
            if self._demo is None:
                raise ResolveError("the offline demo provider is not available in this process")
            return self._demo(self._config_path)
        key = (settings.provider, settings.base_url, settings.api_key)
        if (kept := self._kept.get(key)) is not None:
            return kept
        m = self._config.model
        try:
            provider = make_provider(
                settings.provider, client=self._http, base_url=settings.base_url,
                api_key=settings.api_key, stream=m.stream, stream_memory=self.stream_memory,
                connect_timeout=m.connect_timeout_seconds, read_timeout=m.timeout_seconds,
                request_timeout=m.request_timeout_seconds, max_retries=m.max_retries, backoff_base=m.retry_backoff_seconds,
            )
        except ValueError as exc:
            raise ResolveError(str(exc)) from None
        if len(self._kept) >= KEPT_PROVIDERS:
            del self._kept[next(iter(self._kept))]
        self._kept[key] = provider
        return provider
