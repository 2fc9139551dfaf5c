"""Per-turn settings: precedence and where the configured API key may go (SPEC §9)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tether.daemon.config.core import Config, ModelConfig
from tether.daemon.config.turn import ResolveError, resolve_turn

CONFIG = replace(Config(), model=ModelConfig(provider="custom", base_url="http://mine/v1",
                                             default="m", api_key="secret-key"))


def test_turn_options_beat_session_options_beat_config():
    settings = resolve_turn(CONFIG, {"model": "session-model", "max_turns": 3},
                            {"model": "turn-model"})
    assert (settings.model, settings.max_turns) == ("turn-model", 3)
    assert resolve_turn(CONFIG, {}, {}).model == "m"


def test_the_configured_key_goes_to_the_configured_endpoint():
    assert resolve_turn(CONFIG, {}, {}).api_key == "secret-key"
    same = resolve_turn(CONFIG, {}, {"base_url": "http://mine/v1/"})
    assert same.api_key == "secret-key"


def test_a_base_url_from_the_wire_never_receives_the_configured_key():
    turn = resolve_turn(CONFIG, {}, {"base_url": "http://elsewhere/v1"})
    assert (turn.base_url, turn.api_key) == ("http://elsewhere/v1", None)
    session = resolve_turn(CONFIG, {"base_url": "http://elsewhere/v1"}, {})
    assert session.api_key is None


def test_a_base_url_without_a_provider_means_that_endpoint_not_the_demo():
    demo = Config()  # provider demo, nothing configured
    turn = resolve_turn(demo, {}, {"base_url": "http://127.0.0.1:8000/v1"})
    assert (turn.provider, turn.base_url) == ("custom", "http://127.0.0.1:8000/v1")
    session = resolve_turn(demo, {"base_url": "http://127.0.0.1:8000/v1"}, {})
    assert session.provider == "custom"
    named = resolve_turn(demo, {}, {"base_url": "http://x/v1", "provider": "demo"})
    assert named.provider == "demo"  # a provider the user named is kept
    assert resolve_turn(CONFIG, {}, {"base_url": "http://x/v1"}).provider == "custom"


def test_another_providers_default_url_never_receives_the_configured_key():
    """A client asking only for provider openai must not send an internal
    endpoint's key to api.openai.com."""
    # ... and with no key of its own, such a turn is refused, not sent unauthenticated
    with pytest.raises(ResolveError, match="needs an API key"):
        resolve_turn(CONFIG, {}, {"provider": "openai"})
    openai = replace(Config(), model=ModelConfig(provider="openai", api_key="sk-openai"))
    assert resolve_turn(openai, {}, {}).api_key == "sk-openai"
    assert resolve_turn(openai, {}, {"provider": "openai"}).api_key == "sk-openai"
    same = resolve_turn(openai, {}, {"base_url": "https://api.openai.com/v1/"})
    assert same.api_key == "sk-openai"  # the same endpoint, spelled out
    assert resolve_turn(openai, {}, {"provider": "custom",
                                     "base_url": "http://elsewhere/v1"}).api_key is None
