"""The home's layout and its resolution, the one rule the owner and clients share."""

from pathlib import Path

import platformdirs
import pytest

from tether.rpc import HOME_ENV, HomeLayout, resolve_home


def test_the_layout_is_spec_section_1(tmp_path):
    home = HomeLayout(tmp_path)
    assert home.config == tmp_path / "config.yaml"
    assert home.db == tmp_path / "state.db"
    assert home.lock == tmp_path / "daemon.lock"
    assert home.descriptor == tmp_path / "daemon.json"
    assert home.socket == tmp_path / "daemon.sock"
    assert home.logs == tmp_path / "logs"
    assert home.owner_stdio_log == tmp_path / "logs" / "daemon.log"


def test_computing_the_layout_touches_nothing(tmp_path):
    home = HomeLayout(tmp_path / "new")
    assert home.socket.parent == tmp_path / "new"
    assert not (tmp_path / "new").exists()


def test_an_explicit_home_wins_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "env"))
    assert resolve_home(tmp_path / "flag") == tmp_path / "flag"
    assert resolve_home(str(tmp_path / "flag")) == tmp_path / "flag"


@pytest.mark.parametrize("explicit", [None, ""])
def test_without_a_flag_the_environment_names_the_home(tmp_path, monkeypatch, explicit):
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "env"))
    assert resolve_home(explicit) == tmp_path / "env"


def test_otherwise_the_platform_user_data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv(HOME_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    expected = Path(platformdirs.user_data_dir("tether", appauthor=False))
    assert resolve_home(None) == expected
    assert resolve_home(None).name == "tether" and resolve_home(None).is_absolute()


def test_a_home_is_absolute_and_user_expanded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert resolve_home("rel") == tmp_path / "rel"
    assert resolve_home("~/h") == tmp_path / "user" / "h"
    monkeypatch.setenv(HOME_ENV, "~/env")
    assert resolve_home(None) == tmp_path / "user" / "env"
