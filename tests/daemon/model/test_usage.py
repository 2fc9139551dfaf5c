"""usage.py: one shape for every server's usage object, sums, prices, and the shipped
price table's freshness (docs/dependencies.md, "The price table")."""

from __future__ import annotations

import datetime

import pytest

from tether.daemon.config.core import ConfigError, build_config
from tether.daemon.model.usage import Prices, add, normalise, price_table, totals, turn_cost

#: the shipped table is refreshed (scripts/refresh_prices.py) at least this often
MAX_TABLE_AGE_DAYS = 180


def test_normalise_reads_nested_and_aliased_counters() -> None:
    raw = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
           "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
           "completion_tokens_details": {"reasoning_tokens": 2}, "junk": "x",
           "queue_time": 0.1, "flag": True}
    assert normalise(raw) == {"prompt_tokens": 10, "completion_tokens": 5,
                              "total_tokens": 15, "cached_tokens": 4, "reasoning_tokens": 2}
    # DeepSeek names its cache hits differently; negative or boolean counters are dropped
    assert normalise({"prompt_tokens": 3, "prompt_cache_hit_tokens": 1,
                      "completion_tokens": -1, "total_tokens": True}) == {
        "prompt_tokens": 3, "cached_tokens": 1}
    assert normalise(None) == {} and normalise([1]) == {}
    assert add({"prompt_tokens": 1}, {"prompt_tokens": 2, "cached_tokens": 1}) == {
        "prompt_tokens": 3, "cached_tokens": 1}


def test_prices_configured_first_then_table_else_unknown() -> None:
    prices = Prices({"gpt-4o": {"input": 1.0, "output": 1.0}, "mine": {"input": 3.0,
                                                                       "output": 6.0}})
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000}
    assert prices.cost("gpt-4o", usage) == 2.0  # config overrides the table
    assert prices.cost("mine", usage) == 9.0
    table = Prices()
    gpt4o = price_table()["models"]["gpt-4o"]
    assert table.cost("gpt-4o", usage) == pytest.approx(gpt4o["input"] + gpt4o["output"])
    assert table.cost("openai/gpt-4o", usage) == table.cost("gpt-4o", usage)
    assert table.cost("no-such-model-anywhere", usage) is None
    # cached tokens at their own rate (or the input rate when none is given)
    cached = {"prompt_tokens": 1_000_000, "cached_tokens": 400_000}
    assert Prices({"m": {"input": 1.0, "output": 0.0, "cached_input": 0.1}}).cost(
        "m", cached) == pytest.approx(0.6 + 0.04)
    assert Prices({"m": {"input": 1.0, "output": 0.0}}).cost("m", cached) == 1.0
    assert turn_cost(table, "no-such-model-anywhere", {}) == 0.0  # nothing used


def test_totals_are_unknown_when_one_model_is() -> None:
    prices = Prices({"a": {"input": 1.0, "output": 1.0}})
    known = totals({"a": {"prompt_tokens": 500_000, "completion_tokens": 500_000,
                          "requests": 2}}, prices)
    assert known["cost_usd"] == 1.0 and known["requests"] == 2
    both = totals({"a": {"prompt_tokens": 1, "requests": 1},
                   "b": {"prompt_tokens": 1, "requests": 1}}, prices)
    assert both["cost_usd"] is None and both["prompt_tokens"] == 2
    assert totals({}, prices)["cost_usd"] == 0.0


def test_config_prices_are_checked() -> None:
    cfg = build_config({"model": {"prices": {"m": {"input": 1, "output": 2.5}}}}, env={})
    assert cfg.model.prices == {"m": {"input": 1.0, "output": 2.5}}
    for bad, words in (({"m": {"input": 1}}, "needs `output`"),
                       ({"m": {"input": 1, "output": "x"}}, "must be a number"),
                       ({"m": {"input": 1, "output": 1, "cache": 1}}, "unknown key"),
                       ({"m": 3}, "must be a mapping"), ([1], "must be a mapping")):
        with pytest.raises(ConfigError, match=words):
            build_config({"model": {"prices": bad}}, env={})
    for key, value in (("compact", "sometimes"), ("compact_at", 1.5),
                       ("context_window", 10)):
        with pytest.raises(ConfigError, match=key):
            build_config({"model": {key: value}}, env={})


def test_shipped_price_table_is_fresh_and_well_formed() -> None:
    doc = price_table()
    made = datetime.date.fromisoformat(doc["generated_at"])
    age = (datetime.date.today() - made).days
    assert age <= MAX_TABLE_AGE_DAYS, (
        f"data/model_prices.json is {age} days old: run scripts/refresh_prices.py "
        "(docs/dependencies.md, 'The price table')")
    assert doc["source"].startswith("litellm ")
    models = doc["models"]
    assert len(models) > 100
    for name, price in models.items():
        assert price["input"] >= 0 and price["output"] >= 0, name
        assert set(price) <= {"input", "output", "cached_input", "context_window"}, name
