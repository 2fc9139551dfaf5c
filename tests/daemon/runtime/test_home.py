"""The owner's side of its home: the shared layout, creating the home, the one lock."""

import os
import stat

import orjson
import pytest

from tether.daemon.runtime.home import Home, OwnerRunning
from tether.rpc.home import HomeLayout


def test_the_owner_uses_the_layout_clients_find_it_by(tmp_path):
    home = Home(tmp_path)
    layout = HomeLayout(tmp_path)
    for name in ("config", "db", "lock", "descriptor", "socket", "logs"):
        assert getattr(home, name) == getattr(layout, name)


def test_ensure_makes_a_private_home_with_its_logs(tmp_path):
    home = Home(tmp_path / "h")
    (tmp_path / "h").mkdir(mode=0o755)
    home.ensure()
    assert stat.S_IMODE(home.root.stat().st_mode) == 0o700
    assert home.logs.is_dir()


def test_a_second_lock_names_the_holder(tmp_path):
    home = Home(tmp_path)
    home.ensure()
    fd = home.acquire_lock()
    try:
        with pytest.raises(OwnerRunning) as caught:
            Home(tmp_path).acquire_lock()
        assert caught.value.pid == os.getpid()
    finally:
        os.close(fd)
    os.close(Home(tmp_path).acquire_lock())  # released with its descriptor


def test_the_descriptor_is_private_and_removed_with_the_socket(tmp_path):
    home = Home(tmp_path)
    home.write_descriptor({"protocol": "tether/1", "pid": 1})
    assert orjson.loads(home.descriptor.read_bytes()) == {"protocol": "tether/1", "pid": 1}
    assert stat.S_IMODE(home.descriptor.stat().st_mode) == 0o600
    home.socket.touch()
    home.remove_runtime_files()
    home.remove_runtime_files()  # nothing left is not an error
    assert not home.descriptor.exists() and not home.socket.exists()
