"""Per-turn settings: precedence and where the configured API key may go (SPEC §9)."""

from __future__ import annotations

from dataclasses import replace

from tether.daemon.config import Config, ModelConfig
from tether.daemon.resolve import resolve_turn

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
