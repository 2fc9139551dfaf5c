"""Tokens and cost: a model server's usage object in one shape, sums of it, and prices.

Every usage this owner keeps has the same integer counters, each present only
when the server reported it: ``prompt_tokens``, ``completion_tokens``,
``total_tokens``, ``cached_tokens`` (of the prompt, read from a cache: OpenAI's
``prompt_tokens_details.cached_tokens``, DeepSeek's ``prompt_cache_hit_tokens``)
and ``reasoning_tokens`` (of the completion: ``completion_tokens_details``).

Cost is USD, from a price per million tokens: config ``model.prices`` first,
then the table shipped in data/model_prices.json (docs/dependencies.md says
where it comes from and how it is refreshed). A model found in neither has an
unknown cost (None), never a guess; so has a session that used such a model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = ["USAGE_KEYS", "Price", "Prices", "normalise", "add", "turn_cost", "totals",
           "price_table"]

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens",
              "reasoning_tokens")
#: where a counter may be nested in a server's usage object
_NESTED = {("prompt_tokens_details", "cached_tokens"): "cached_tokens",
           ("completion_tokens_details", "reasoning_tokens"): "reasoning_tokens"}
_ALIASES = {"prompt_cache_hit_tokens": "cached_tokens"}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


def normalise(raw: Any) -> dict[str, int]:
    """A server's usage object → the counters above (others are dropped)."""
    if not isinstance(raw, dict):
        return {}
    out: dict[str, int] = {}
    for key in USAGE_KEYS:
        if (v := _int(raw.get(key))) is not None:
            out[key] = v
    for (outer, inner), key in _NESTED.items():
        details = raw.get(outer)
        if isinstance(details, dict) and (v := _int(details.get(inner))) is not None:
            out[key] = v
    for alias, key in _ALIASES.items():
        if key not in out and (v := _int(raw.get(alias))) is not None:
            out[key] = v
    return out


def add(total: dict[str, int], usage: dict[str, Any]) -> dict[str, int]:
    """Add ``usage``'s counters into ``total`` (in place; returned for chaining)."""
    for key, value in usage.items():
        if (v := _int(value)) is not None:
            total[key] = total.get(key, 0) + v
    return total


@dataclass(frozen=True)
class Price:
    """USD per million tokens; ``cached_input`` None: cached tokens cost ``input``."""

    input: float
    output: float
    cached_input: float | None = None
    context_window: int | None = None

    def cost(self, usage: dict[str, int]) -> float:
        prompt = usage.get("prompt_tokens", 0)
        cached = min(usage.get("cached_tokens", 0), prompt)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        usd = ((prompt - cached) * self.input + cached * cached_rate
               + usage.get("completion_tokens", 0) * self.output)
        return usd / 1_000_000


@lru_cache(maxsize=1)
def price_table() -> dict[str, Any]:
    """The shipped table: {source, generated_at, unit, models: {name: {...}}}."""
    text = resources.files("tether.daemon").joinpath("data/model_prices.json").read_text()
    doc: dict[str, Any] = json.loads(text)
    return doc


def _price(entry: Mapping[str, Any]) -> Price:
    cached = entry.get("cached_input")
    window = entry.get("context_window")
    return Price(float(entry["input"]), float(entry["output"]),
                 None if cached is None else float(cached),
                 window if isinstance(window, int) else None)


class Prices:
    """Prices by model name: configured ones first, then the shipped table."""

    def __init__(self, configured: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._configured = {name: _price(p) for name, p in (configured or {}).items()}

    def lookup(self, model: str | None) -> Price | None:
        if not model:
            return None
        if (p := self._configured.get(model)) is not None:
            return p
        table = price_table()["models"]
        for name in (model, model.rsplit("/", 1)[-1]):  # "openai/gpt-4o" is gpt-4o
            if (p := self._configured.get(name)) is not None:
                return p
            if (entry := table.get(name)) is not None:
                return _price(entry)
        return None

    def cost(self, model: str | None, usage: dict[str, int]) -> float | None:
        """USD of ``usage`` on ``model``; None when its price is not known."""
        price = self.lookup(model)
        return None if price is None else round(price.cost(usage), 6)


def turn_cost(prices: Prices, model: str | None, usage: dict[str, int]) -> float | None:
    """A turn's cost: 0 when it used no token, else ``prices.cost``."""
    if not any(usage.get(k) for k in ("prompt_tokens", "completion_tokens")):
        return 0.0
    return prices.cost(model, usage)


def totals(by_model: dict[str, dict[str, int]], prices: Prices) -> dict[str, Any]:
    """A session's totals from its per-model sums: every counter summed, ``requests``,
    ``cost_usd`` (None if any model used has no known price) and ``by_model``."""
    out: dict[str, Any] = {k: 0 for k in USAGE_KEYS}
    out["requests"] = 0
    cost: float | None = 0.0
    for model, usage in by_model.items():
        add(out, usage)
        c = turn_cost(prices, model, usage)
        cost = None if c is None or cost is None else cost + c
    out["cost_usd"] = None if cost is None else round(cost, 6)
    out["by_model"] = by_model
    return out
