"""One rule for a prompt's length: whatever its size, a text longer than the owner's
``daemon.max_text_chars`` is refused with the same invalid_params naming that limit,
also beyond the protocol's own ceiling (docs/configuration.md, docs/protocol.md)."""

import subprocess
import sys

import pytest
from fakeprovider import text_reply
from harness import write_config
from scene import owner_env

from tether.rpc.protocol import MAX_TEXT_CHARS

LIMIT = 200_000  # the default of daemon.max_text_chars


async def test_any_text_over_the_configured_limit_gets_the_same_refusal(scene):
    async with scene(lambda req: text_reply("ok")) as s:
        peer, sid = s.peer, s.session_id
        errors = {}
        for n in (500_000, 1_200_000):
            reply = await peer.call("prompt.submit", session_id=sid,
                                    input_id=f"n{n}", text="x" * n)
            errors[n] = reply["error"]
        # an attachment past the protocol's ceiling counts toward the same limit
        reply = await peer.call(
            "prompt.submit", session_id=sid, input_id="att", text="hi",
            attachments=[{"name": "big.txt", "content": "y" * (MAX_TEXT_CHARS + 1)}])
        attached = reply["error"]
        ok = await peer.result("prompt.submit", session_id=sid, input_id="fits",
                               text="x" * LIMIT)
        assert ok["status"] in ("queued", "started", "terminal")
    for n, error in errors.items():
        assert error["message"] == "invalid_params", error
        assert error["data"]["detail"] == f"text is {n} characters; the limit is {LIMIT}"
        assert error["data"]["fields"] == [{"loc": "text", "msg": f"longer than {LIMIT}",
                                            "type": "too_long"}]
    assert attached["message"] == "invalid_params"
    assert attached["data"]["detail"] == (f"text and attachments are {MAX_TEXT_CHARS + 3} "
                                          f"characters; the limit is {LIMIT}")


async def test_the_cli_names_the_configured_limit_for_any_long_prompt(scene, tmp_path):
    async with scene(lambda req: text_reply("ok"), session=False,
                     daemon={"max_text_chars": 300_000}) as s:
        for n in (500_000, 1_200_000):
            prompt = tmp_path / f"p{n}.txt"
            prompt.write_text("x" * n)
            done = subprocess.run(
                [sys.executable, "-m", "tether.clients.cli", "chat", "-Q",
                 "--query-file", str(prompt)], env=s.env(), capture_output=True,
                text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
            assert done.returncode == 2, done
            assert done.stderr.splitlines()[0] == (
                f"tether: invalid_params: text is {n} characters; the limit is 300000")


@pytest.mark.parametrize("value", [MAX_TEXT_CHARS + 1, 0])
def test_a_limit_beyond_the_protocols_ceiling_is_a_configuration_error(tmp_path, store_url,
                                                                       value):
    home = tmp_path / "home"
    write_config(home, daemon={"max_text_chars": value})
    done = subprocess.run([sys.executable, "-m", "tether.daemon", "--home", str(home)],
                          env=owner_env(home, store_url), capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2, done
    assert "`daemon.max_text_chars` must be from 1 to 1000000" in done.stderr
