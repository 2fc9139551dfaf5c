"""The offline demo provider: a scripted, deterministic stand-in for a model.

With nothing configured, tether runs on `DemoProvider` so a new user can watch the whole flow
(a turn that delegates to two children and joins their results) with no model at hand. Every
top-level answer is labelled ``[demo provider]`` and ends with a hint on configuring a real
model, so nobody mistakes it for inference.

The script, decided only from the messages and tools it is given:

- a child agent's request (its system prompt is delegation's `CHILD_SYSTEM_PROMPT`) -> a
  short text summary of the child's goal;
- a fresh parent prompt, with ``delegate_task`` offered -> one ``delegate_task`` call with two
  tasks, one per half of the prompt;
- ``delegate_task`` results (``{"results": [...]}``) as the latest tool messages -> an answer
  that quotes every child's summary;
- ``{"status": "dispatched"}`` (background delegation) -> a note that results will arrive as
  a new turn;
- a user message starting with delegation's `RESULTS_PREFIX` (background results delivered
  as a new turn) -> an answer quoting the summaries in that message's JSON;
- anything else -> an echo-style reply with the hint.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from pathlib import Path
from typing import Any

from .delegation.tasks import CHILD_SYSTEM_PROMPT, RESULTS_PREFIX
from .delegation.tasks import TOOL_NAME as DELEGATE_TOOL
from .model.provider import Completion, DeltaCallback, ToolCall

__all__ = ["DEMO_LABEL", "DemoProvider", "demo_provider"]

DEMO_LABEL = "[demo provider]"

# Bounds on how much of the user's text is echoed into goals and summaries.
_HALF_MAX_WORDS = 60
_QUOTE_MAX_WORDS = 12
_STREAM_CHUNKS = 3


def _text_of(message: dict) -> str:
    """The text of a chat message whose content is a string or a list of content parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def _words(n: int) -> str:
    return "1 word" if n == 1 else f"{n} words"


def _shorten(text: str, max_words: int) -> str:
    words = text.split()
    return " ".join(words[:max_words]) + (" …" if len(words) > max_words else "")


def _offers(tools: list[dict] | None, name: str) -> bool:
    for tool in tools or []:
        function = tool.get("function")
        if not isinstance(function, dict):
            function = tool
        if function.get("name") == name:
            return True
    return False


def _first_json(text: str) -> Any:
    """The first JSON object or array embedded in ``text``, or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", text):
        try:
            return decoder.raw_decode(text, match.start())[0]
        except json.JSONDecodeError:
            continue
    return None


def _find_results(obj: Any) -> list[dict] | None:
    """Every child result under a ``results`` key anywhere in ``obj`` (None if there is none)."""
    found: list[dict] = []
    seen = False

    def walk(node: Any) -> None:
        nonlocal seen
        if isinstance(node, dict):
            results = node.get("results")
            if isinstance(results, list):
                seen = True
                found.extend(r for r in results if isinstance(r, dict))
            for key, value in node.items():
                if key != "results":
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(obj)
    return found if seen else None


def _count_words(messages: list[dict]) -> int:
    total = 0
    for message in messages:
        total += len(_text_of(message).split())
        for call in message.get("tool_calls") or []:
            total += len(str(call.get("function", {}).get("arguments", "")).split())
    return total


class DemoProvider:
    """A `Provider` that answers from a fixed script, offline; see the module docstring."""

    name = "demo"

    def __init__(self, *, config_path: str | None = None) -> None:
        # The real path makes the hint copy-pasteable; the daemon passes it when it knows it.
        self.config_path = config_path or "<home>/config.yaml"

    @property
    def hint(self) -> str:
        """The one-line pointer to configuring a real model that ends top-level answers."""
        return (
            f"Hint: this is tether's offline demo provider. To use a real model, set "
            f"`model.provider: custom` and `model.base_url` in {self.config_path}, "
            f"or run with `--provider custom --base-url URL --model M`."
        )

    async def complete(
        self,
        *,
        messages: list[dict],
        tools: list[dict] | None,
        model: str,
        reasoning: str | None = None,
        on_delta: DeltaCallback | None = None,
        on_reasoning: DeltaCallback | None = None,
        extras: dict[str, Any] | None = None,
    ) -> Completion:
        """Answer per the script; text is streamed to ``on_delta`` in a few chunks
        (``extras`` are ignored: the script decides)."""
        text, tool_calls = self.plan(messages, tools)
        if text and on_delta is not None:
            pieces = re.findall(r"\S+\s*", text)
            size = math.ceil(len(pieces) / _STREAM_CHUNKS)
            for start in range(0, len(pieces), size):
                await on_delta("".join(pieces[start : start + size]))
                # Yield so viewers see separate deltas, as they would from a real stream.
                await asyncio.sleep(0)
        produced = len((text or "").split()) + sum(len(c.arguments.split()) for c in tool_calls)
        prompt = _count_words(messages)
        return Completion(
            text=text,
            tool_calls=tool_calls,
            usage={
                "prompt_tokens": prompt,
                "completion_tokens": produced,
                "total_tokens": prompt + produced,
            },
            finish_reason="tool_calls" if tool_calls else "stop",
            reasoning=None,
            model=model or "demo",
        )

    def plan(
        self, messages: list[dict], tools: list[dict] | None
    ) -> tuple[str | None, list[ToolCall]]:
        """The scripted answer to ``messages``: (text, tool calls). Pure and deterministic."""
        users = [m for m in messages if m.get("role") == "user"]
        if users and messages[0].get("role") == "system" \
                and _text_of(messages[0]) == CHILD_SYSTEM_PROMPT:
            return self._child_summary(_text_of(users[0])), []
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            return self._after_tools(messages), []
        if last.get("role") == "user":
            text = _text_of(last)
            if text.lstrip().startswith(RESULTS_PREFIX):
                results = _find_results(_first_json(text))
                return self._synthesis(results, background=True), []
            if _offers(tools, DELEGATE_TOOL):
                return None, [self._delegate_call(text, messages)]
        latest = _text_of(users[-1]) if users else ""
        return f"{DEMO_LABEL} You said: “{_shorten(latest, 40)}”.\n{self.hint}", []

    def _delegate_call(self, text: str, messages: list[dict]) -> ToolCall:
        words = text.split()
        middle = (len(words) + 1) // 2
        halves = [" ".join(words[:middle]), " ".join(words[middle:])]
        tasks = [
            {
                "goal": f"Summarise the prompt's {label} half: {_shorten(half, _HALF_MAX_WORDS) or '(empty)'}"
            }
            for label, half in zip(("first", "second"), halves, strict=True)
        ]
        # Distinct per assistant turn so a session's transcript never repeats a call id.
        number = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        return ToolCall(
            id=f"demo_call_{number}", name=DELEGATE_TOOL, arguments=json.dumps({"tasks": tasks})
        )

    def _child_summary(self, text: str) -> str:
        goal = next((line.strip() for line in text.splitlines() if line.strip()), "")
        match = re.match(r"Summarise the prompt's (\w+) half: (.*)", goal, re.S)
        if match:
            part, material = match.groups()
            if material == "(empty)":
                return f"[demo] The {part} half is empty."
            return (f"[demo] The {part} half ({_words(len(material.split()))}) reads "
                    f"“{_shorten(material, _QUOTE_MAX_WORDS)}”.")
        return (f"[demo] Looked at “{_shorten(goal, _QUOTE_MAX_WORDS)}” "
                f"({_words(len(goal.split()))}).")

    def _after_tools(self, messages: list[dict]) -> str:
        trailing: list[dict] = []
        for message in reversed(messages):
            if message.get("role") != "tool":
                break
            trailing.append(message)
        results: list[dict] | None = None
        dispatched = False
        for message in reversed(trailing):
            payload = _first_json(_text_of(message))
            found = _find_results(payload)
            if found is not None:
                results = (results or []) + found
            elif isinstance(payload, dict) and payload.get("status") == "dispatched":
                dispatched = True
        if results is not None:
            return self._synthesis(results, background=False)
        if dispatched:
            return (
                f"{DEMO_LABEL} The helpers are working on this in the background; "
                f"their results will arrive in this session as a new turn when they finish."
            )
        return f"{DEMO_LABEL} The tool finished; the demo has nothing more to add.\n{self.hint}"

    def _synthesis(self, results: list[dict] | None, *, background: bool) -> str:
        if not results:
            return (
                f"{DEMO_LABEL} Delegation results arrived, but they held no summaries.\n{self.hint}"
            )
        ordered = sorted(
            results,
            key=lambda r: r.get("task_index", 0) if isinstance(r.get("task_index"), int) else 0,
        )
        lines = [
            f"{DEMO_LABEL} {'Background results are in' if background else 'The helpers reported back'}"
            f" ({len(ordered)} task{'s' if len(ordered) != 1 else ''}):"
        ]
        for number, result in enumerate(ordered, start=1):
            status = result.get("status", "completed")
            summary = result.get("summary") or result.get("error") or "(no summary)"
            prefix = "" if status == "completed" else f"[{status}] "
            lines.append(f"{number}. {prefix}“{summary}”")
        lines += ["", self.hint]  # a paragraph of its own, not part of the last item
        return "\n".join(lines)


def demo_provider(config_path: Path | None) -> DemoProvider:
    """The demo for a turn, its setup hint naming the owner's ``config_path`` when known."""
    return DemoProvider(config_path=str(config_path) if config_path else None)
