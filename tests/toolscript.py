"""A scripted model for tool tests: each prompt names the tool calls the model makes.

``ScriptedModel({prompt: [(tool, args), ...]})`` answers a request with the next
call of its prompt's script (the number of tool results since the newest user
message says how far it got), then with ``DONE`` and the last tool result.
Prompts not in the script get a plain text answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fakeprovider import Reply, text_reply, tool_call_reply

#: a tool call: its name and arguments, or a function of the results so far (parsed)
Call = tuple[str, dict[str, Any] | Callable[[list[Any]], dict[str, Any]]]


def since_last_user(req: dict) -> list[dict]:
    msgs = req["messages"]
    last = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    return msgs[last + 1:]


def newest_user(req: dict) -> str:
    return [m for m in req["messages"] if m["role"] == "user"][-1]["content"] or ""


class ScriptedModel:
    def __init__(self, script: dict[str, list[Call]]) -> None:
        self.script = script
        self.requests: list[dict] = []

    def __call__(self, req: dict) -> Reply:
        self.requests.append(req)
        text = newest_user(req)
        calls = next((v for k, v in self.script.items() if text.startswith(k)), None)
        results = [m for m in since_last_user(req) if m["role"] == "tool"]
        if calls is None:
            return text_reply(f"ANSWER: {text[:200]}")
        if len(results) < len(calls):
            name, args = calls[len(results)]
            if callable(args):
                args = args([json.loads(r["content"]) for r in results])
            return tool_call_reply(name, args, call_id=f"call_{len(results)}")
        return text_reply("DONE " + (results[-1]["content"] if results else ""))


def tool_results(model: ScriptedModel, prompt: str) -> list[dict[str, Any]]:
    """The tool results (parsed) the model saw for ``prompt`` in its last request."""
    for req in reversed(model.requests):
        if newest_user(req).startswith(prompt):
            return [json.loads(m["content"]) for m in since_last_user(req)
                    if m["role"] == "tool"]
    return []
