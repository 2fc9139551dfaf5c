"""tether against a real model: SmolLM2-135M-Instruct served by llama-cpp-python.

A tiny model says little of use, so these tests assert what tether does with a real
server's answers, not what the model says: the finite chat prints text, an
interactive turn streams it in deltas, the HTTP endpoint relays it to the `openai`
client, and with the server's tool-calling format (``chatml-function-calling``,
which cannot stream with automatic tool choice) ``model.stream: auto`` falls back
to plain requests where ``true`` fails as the server makes it.
"""

from __future__ import annotations

import subprocess
import sys

import openai
import pytest
from harness import OwnerProcess, Peer, clean_env, write_config
from llamaserver import MODEL, missing

from tether.clients.cli.admin.doctor import EXIT_CHECK_FAILED

pytestmark = [pytest.mark.skipif(missing() is not None, reason=str(missing())),
              pytest.mark.timeout(300)]

CLI = [sys.executable, "-m", "tether.clients.cli"]


def _configure(home, server, **model) -> None:
    write_config(home, server.url, model={"default": MODEL, **model})


async def _turn(home, text: str, **params) -> tuple[dict, list[dict]]:
    """Submit ``text`` in a new session; the final receipt and the turn's events."""
    async with await Peer.connect(home) as peer:
        sid = (await peer.result("session.create"))["session_id"]
        receipt = await peer.result("prompt.submit", session_id=sid, input_id="in-1",
                                    text=text, **params)
        done = await peer.wait_terminal(sid, receipt["admission_id"], timeout=240)
        await peer.wait_event(lambda e: e["type"] == "message.complete"
                              and e["admission_id"] == receipt["admission_id"], timeout=30)
        return done, [e for e in peer.events if e["admission_id"] == receipt["admission_id"]]


def test_finite_chat_prints_the_models_answer(tmp_path, llama_server):
    home = tmp_path / "home"
    _configure(home, llama_server("chatml"))
    with OwnerProcess(home):
        done = subprocess.run([*CLI, "chat", "-Q", "-q",
                               "Say hello in one short sentence."],
                              env=clean_env(home), capture_output=True, text=True, timeout=240,
                              stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the model's answer is printed"


async def test_an_interactive_turn_streams_the_answer(tmp_path, llama_server):
    home = tmp_path / "home"
    _configure(home, llama_server("chatml"))
    with OwnerProcess(home):
        done, events = await _turn(home, "Name three colours.")
    assert done["outcome"] == "completed", done
    deltas = [e["payload"]["text"] for e in events if e["type"] == "message.delta"]
    assert len(deltas) > 1, "the answer arrived in pieces, as the server streamed it"
    assert "".join(deltas) == done["result"]["text"] != ""


async def test_the_http_endpoint_relays_the_answer_to_the_openai_client(tmp_path,
                                                                        llama_server):
    home = tmp_path / "home"
    _configure(home, llama_server("chatml"))
    with OwnerProcess(home, "--tcp", "127.0.0.1:0") as owner:
        async with await Peer.connect(home) as peer:
            token = (await peer.result("token.create", label="api"))["token"]
        base = owner.descriptor["tcp_url"].replace("ws://", "http://").rstrip("/") + "/v1"
        async with openai.AsyncOpenAI(base_url=base, api_key=token, max_retries=0,
                                      timeout=240) as api:
            whole = await api.chat.completions.create(
                model="tether", messages=[{"role": "user", "content": "Say hi."}])
            stream = await api.chat.completions.create(
                model="tether", messages=[{"role": "user", "content": "Say bye."}],
                stream=True)
            chunks = [c async for c in stream]
    assert whole.choices[0].message.content and whole.choices[0].finish_reason == "stop"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


async def test_the_tool_calling_format_works_in_auto_and_fails_in_true(tmp_path,
                                                                      llama_server):
    server = llama_server("chatml-function-calling")
    auto_home, true_home = tmp_path / "auto", tmp_path / "true"
    _configure(auto_home, server)
    _configure(true_home, server, stream="true")
    with OwnerProcess(auto_home):
        first, events = await _turn(auto_home, "What is 2 + 2?", finite=True,
                                    toolsets=["files"], max_turns=3)
        second, _ = await _turn(auto_home, "And 3 + 3?", finite=True, toolsets=["files"],
                                max_turns=3)
    for done in (first, second):
        # what the model does with tools is its own (SmolLM2 likes calling them); what
        # tether does is run every call and ask again, never failing on the stream
        assert done["outcome"] == "completed" or done["result"]["error"] == \
            "stopped after 3 model calls without a final answer", done["result"]
    if first["outcome"] == "completed":
        text = "".join(e["payload"]["text"] for e in events if e["type"] == "message.delta")
        assert text == first["result"]["text"]
    else:
        assert [e for e in events if e["type"] == "tool.complete"], "it ran the model's calls"
    log = (auto_home / "logs" / "owner.log").read_text()
    assert log.count("asking again without streaming") == 1, "once, then remembered"
    assert "cannot stream" in log

    with OwnerProcess(true_home):
        failed, _ = await _turn(true_home, "What is 2 + 2?", finite=True, toolsets=["files"])
    assert failed["outcome"] == "failed"
    assert "malformed_response" in failed["result"]["error"]
    assert "event stream ended" in failed["result"]["error"]

    doctor = subprocess.run([*CLI, "doctor"], env=clean_env(true_home),
                            capture_output=True, text=True, timeout=240, check=False)
    stream_line = next(line for line in doctor.stdout.splitlines() if " stream " in line)
    assert f"{MODEL} answers with tools only without streaming" in stream_line
    assert "model.stream true fails every turn" in stream_line
    assert doctor.returncode == EXIT_CHECK_FAILED
