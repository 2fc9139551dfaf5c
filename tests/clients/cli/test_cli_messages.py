"""Error lines keep the documented shape `tether: reason: detail` on every path."""

from __future__ import annotations

from harness import OwnerProcess, clean_env, write_config


def test_serve_foreground_beside_a_running_owner_names_the_reason(tmp_path, run_cli):
    home = tmp_path / "home"
    write_config(home)
    with OwnerProcess(home, env=clean_env(home)):
        second = run_cli(home, "serve", "--foreground", timeout=60)
    assert second.returncode != 0, second
    assert second.stderr.startswith("tether: already_running: an owner is already running"), \
        second.stderr
    assert "\nhint: " in second.stderr
