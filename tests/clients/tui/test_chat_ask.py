"""The hook for asking the user inside the interactive chat (`Chat.ask`, for approval
prompts): it takes over the input line, returns the answer, and gives the line back
with the draft that was being typed. Driven in-process through prompt_toolkit's pipe
input against a real owner."""

from __future__ import annotations

import asyncio
import json
import time

from fakeprovider import FakeProvider, prompt_of, text_reply
from harness import OwnerProcess, clean_env, db_rows, write_config
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from tether.clients.library.client import TetherClient
from tether.clients.tui.interactive import Chat
from tether.clients.tui.plan import ChatPlan


async def until(predicate, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_ask_takes_the_line_and_gives_back_the_draft(tmp_path):
    home = tmp_path / "home"
    plan = ChatPlan(query=None, interactive=True, quiet=False, json=False,
                    stream_to_terminal=True, options={}, resume=None, input_id=None)
    answers: list[str] = []
    asked = asyncio.Event()

    async def approve(chat: Chat, event: dict) -> None:
        if event.get("type") == "message.complete" and not asked.is_set():
            asked.set()
            answers.append(await chat.ask("Allow `rm -rf build`? [y/N]"))

    with FakeProvider(lambda req: text_reply("ANSWER: " + prompt_of(req))) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home, env=clean_env(home)), create_pipe_input() as keys, \
                create_app_session(input=keys, output=DummyOutput()):
            client = await TetherClient.connect(home, autostart=False)
            try:
                chat = Chat(client, home, None, plan)
                chat.event_hooks.append(approve)
                running = asyncio.ensure_future(chat.run())
                await until(lambda: chat.app is not None, "the input line")
                keys.send_text("first question\r")
                await until(lambda: chat.app is not None and chat.session_id is not None,
                            "the first prompt sent")
                keys.send_text("half a dra")  # typed while the answer comes back
                await asyncio.wait_for(asked.wait(), 20)
                await until(lambda: not chat.questions and chat.app is not None,
                            "the question on the input line")
                keys.send_text("y\r")
                await until(lambda: answers, "the answer")
                await until(lambda: chat.app is not None and
                            chat.app.current_buffer.text == "half a dra", "the draft back")
                keys.send_text("ft\r")
                await until(lambda: len(chat.mine) == 2, "the second prompt admitted")
                keys.send_text("\x04")
                code = await asyncio.wait_for(running, 20)
            finally:
                await client.close()
    assert answers == ["y"]
    assert code == 0
    texts = [json.loads(r[0])["text"] for r in db_rows(
        home, "SELECT payload_json FROM session_admissions ORDER BY seq")]
    assert texts == ["first question", "half a draft"], texts
