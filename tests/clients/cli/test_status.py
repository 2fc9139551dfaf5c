"""`tether status`: the running owner, with the provider and model its turns use."""

import json
import os
import time

from fakeprovider import FakeProvider, text_reply
from harness import OwnerProcess, clean_env, sandbox_missing, write_config


def _lines(out: str) -> dict[str, str]:
    return {k: v.strip() for k, _, v in (line.strip().partition(" ") for line in
                                          out.splitlines()[1:])}


def test_status_names_the_provider_and_model_of_the_running_owner(tmp_path, run_cli):
    home = tmp_path / "home"
    with FakeProvider(lambda req: text_reply("ok")) as fake:
        write_config(home, fake.url)
        # the endpoint's credentials, written into its URL, are not shown
        secret_url = fake.url.replace("http://", "http://user:pw-secret@") + "?key=q-secret"
        env = clean_env(home, OPENAI_BASE_URL=secret_url, OPENAI_API_KEY="sk-env-secret-1234")
        with OwnerProcess(home, env=env):
            shown = run_cli(home, "status")
            as_json = run_cli(home, "status", "--json")
            os.utime(home / "config.yaml", (time.time() + 5, time.time() + 5))
            later = run_cli(home, "status")
    assert shown.returncode == 0, shown
    fields = _lines(shown.stdout)
    assert fields["provider"] == f"custom ({fake.url})"
    assert fields["model"] == "test-model"
    assert fields["sandbox"].endswith(", workspace-write, network off") \
        if sandbox_missing() is None else fields["sandbox"].startswith("none — ")
    assert "note" not in fields
    runtime = json.loads(as_json.stdout)["runtime"]
    assert runtime["turn_defaults"] == {"provider": "custom", "model": "test-model",
                                        "base_url": fake.url}
    for out in (shown.stdout, as_json.stdout):
        assert "secret" not in out
    assert _lines(later.stdout)["note"].startswith("config.yaml changed after the owner "
                                                   "started")


def test_status_of_a_demo_owner(tmp_path, run_cli):
    home = tmp_path / "home"
    write_config(home)
    with OwnerProcess(home):
        shown = run_cli(home, "status")
    fields = _lines(shown.stdout)
    assert fields["provider"] == "demo (offline, no endpoint)"
    assert fields["model"] == "tether-demo"


def test_a_socket_this_user_may_not_use_is_named_as_such_not_not_running(tmp_path, run_cli):
    """Run as root without its capabilities (setpriv), the mode of the socket applies."""
    import shutil
    import subprocess

    import pytest
    from clihelp import CLI

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop the capability that ignores modes")
    home = tmp_path / "home"
    with FakeProvider(lambda req: text_reply("ok")) as fake:
        write_config(home, fake.url)
        env = clean_env(home)
        with OwnerProcess(home, env=env):
            sock = json.loads((home / "daemon.json").read_text())["socket"]
            os.chmod(sock, 0)
            try:
                runs = {cmd: subprocess.run(
                    ["setpriv", "--bounding-set=-all", "--inh-caps=-all", *CLI, *cmd],
                    env=env, capture_output=True, text=True, timeout=60)
                    for cmd in (("status",), ("chat", "-Q", "-q", "hi"))}
            finally:
                os.chmod(sock, 0o600)
            assert run_cli(home, "status").returncode == 0  # the owner still runs
    for cmd, out in runs.items():
        assert out.returncode == 3, (cmd, out)
        assert out.stderr.startswith(f"tether: permission_denied: cannot reach the owner of "
                                     f"{home}: permission denied on its socket {sock}"), out
        assert "not running" not in out.stderr and "run tether as the owner's user" in out.stderr
