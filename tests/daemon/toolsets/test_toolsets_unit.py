"""The tools' pure parts: output capping, the output ring, the command environment."""

from __future__ import annotations

from tether.daemon.toolsets.env import command_env
from tether.daemon.toolsets.output import Capture, Ring, cap


def test_cap_keeps_head_and_tail_and_says_what_was_cut():
    assert cap("short", 100) == "short"
    text = "".join(f"{i:05d}\n" for i in range(2000))  # 12000 characters
    out = cap(text, 1000)
    assert out.startswith("00000\n") and out.endswith("01999\n")
    assert "[... 11000 characters cut" in out


def test_capture_holds_bounded_memory_and_matches_cap():
    c = Capture(1000)
    text = "".join(f"{i:05d}\n" for i in range(2000))
    for i in range(0, len(text), 77):
        c.feed(text[i:i + 77].encode())
    assert len(c.head) + len(c.tail) <= 1000
    assert c.text() == cap(text, 1000)
    small = Capture(1000)
    small.feed("héllo\n".encode()[:2])  # a character split across reads
    small.feed("héllo\n".encode()[2:])
    assert small.text() == "héllo\n"


def test_ring_keeps_the_newest_bytes_with_offsets():
    r = Ring(10)
    for chunk in (b"aaaa", b"bbbb", b"cccc", b"dddd"):
        r.write(chunk)
    assert r.written == 16
    text, begin, end = r.read()
    assert begin == r.start and end == 16 and text.endswith("dddd") and len(text) <= 14
    text, begin, _ = r.read(0)
    assert begin == r.start > 0  # the oldest bytes were dropped, and it says from where
    assert r.read(12, 2) == ("dd", 12, 14)
    assert r.tail(3) == "ddd"


def test_the_environment_is_an_allowlist_with_the_configured_keys_dropped_by_value():
    env = {"PATH": "/bin", "HOME": "/h", "LANG": "C", "LC_ALL": "C.UTF-8", "OPENAI_API_KEY": "sk-1",
           "GITHUB_TOKEN": "g", "MY_PASSWORD": "p", "AWS_ACCESS_KEY_ID": "a",
           "TETHER_HOME": "/t", "SSH_AUTH_SOCK": "/s", "EDITOR": "vi", "DB_PASS": "x",
           "MYAPP_PW": "y", "CARGO_HOME": "/c", "MYAPP_DIR": "/m", "MYAPP_PWX": "z",
           "TERM": "contains sk-configured-key inside", "HTTP_AUTHORIZATION": "Bearer y"}
    assert command_env(env, (), ["sk-configured-key", None]) == {
        "PATH": "/bin", "HOME": "/h", "LANG": "C", "LC_ALL": "C.UTF-8"}
    # names and prefixes the owner's configuration adds (sandbox.env_allow)
    out = command_env(env, ("CARGO_HOME", "MYAPP_D*"), ["sk-configured-key"])
    assert set(out) == {"PATH", "HOME", "LANG", "LC_ALL", "CARGO_HOME", "MYAPP_DIR"}
