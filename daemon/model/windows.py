"""The context window of a run's model: config, else the model server, else the
price table, else DEFAULT_CONTEXT_WINDOW (docs/long-sessions.md, "The budget").

A server that says how long its context is (vLLM's ``max_model_len``, LM
Studio's ``max_context_length``, OpenRouter's and others' ``context_length``,
Groq's ``context_window``) says it in its ``GET /models`` entry for the model;
that is asked once per endpoint and model for the owner's life, only of
``custom`` endpoints (OpenAI's own list says nothing of windows), and any
failure simply means "not reported".
"""

from __future__ import annotations

import logging

import httpx

from ..config.core import Config
from ..config.turn import TurnSettings
from .budget import DEFAULT_CONTEXT_WINDOW, Budget
from .usage import Prices

__all__ = ["ContextWindows", "SERVER_KEYS"]

log = logging.getLogger("tether.windows")

#: keys of a /models entry that give the model's context length, in tokens
SERVER_KEYS = ("context_window", "max_model_len", "context_length", "max_context_length",
               "loaded_context_length")
_TIMEOUT = httpx.Timeout(5.0)


def _reported(entry: object) -> int | None:
    if not isinstance(entry, dict):
        return None
    for key in SERVER_KEYS:
        value = entry.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 256:
            return value
    return None


class ContextWindows:
    def __init__(self, config: Config, http: httpx.AsyncClient | None) -> None:
        self._config = config
        self._http = http
        self._prices = Prices(config.model.prices)
        self._asked: dict[tuple[str, str], int | None] = {}

    async def budget(self, settings: TurnSettings) -> Budget:
        m = self._config.model
        return Budget(await self.window(settings), m.compact_at, settings.model)

    async def window(self, settings: TurnSettings) -> int:
        if self._config.model.context_window:
            return self._config.model.context_window
        if settings.provider == "custom" and settings.base_url:
            served = await self._from_server(settings.base_url, settings.api_key,
                                             settings.model)
            if served:
                return served
        price = self._prices.lookup(settings.model)
        if price is not None and price.context_window:
            return price.context_window
        return DEFAULT_CONTEXT_WINDOW

    async def _from_server(self, base_url: str, api_key: str | None,
                           model: str) -> int | None:
        key = (base_url, model)
        if key in self._asked or self._http is None:
            return self._asked.get(key)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        found = None
        try:
            response = await self._http.get(base_url.rstrip("/") + "/models", headers=headers,
                                             timeout=_TIMEOUT)
            if response.status_code == 200:
                listed = response.json().get("data")
                entry = next((e for e in listed if isinstance(e, dict) and e.get("id") == model),
                             None) if isinstance(listed, list) else None
                found = _reported(entry)
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            log.info("could not ask %s/models for %s's context window: %s", base_url, model,
                     exc)
        self._asked[key] = found
        return found
