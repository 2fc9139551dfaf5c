"""The agent loop: model request → tool calls → tool results → repeat.

Runs until the model answers with text (the turn's result), calls a client's
tool (an HTTP request's own ``tools``: the turn ends and the client runs it),
or ``max_turns`` model calls were made. The loop knows nothing of sessions or the store: it
reports everything through an ``AgentSink`` (deltas, tool progress, transcript
additions); engine.py runs it for turns and child agents alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from ..model.budget import Budget, squeeze
from ..model.provider import Completion, Provider, ProviderError
from ..model.usage import add
from .tools import Tool, ToolContext

__all__ = ["AgentResult", "AgentSink", "run_agent"]

#: tool results shown in tool.complete events are cut to this many characters
EVENT_RESULT_CHARS = 2000


@dataclass
class AgentResult:
    text: str
    exit_reason: str  # completed | tool_calls | max_turns | failed
    model: str
    api_calls: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    #: the client's tools the model called (exit_reason tool_calls): the client runs them
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    #: the usage of the last model request alone (what the context holds now)
    last_usage: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.exit_reason in ("completed", "tool_calls")


class AgentSink(Protocol):
    async def delta(self, text: str) -> None: ...
    async def reasoning(self, text: str) -> None: ...
    async def record(self, messages: list[dict[str, Any]], final: bool = False) -> None: ...
    async def tool_start(self, call_id: str, name: str, arguments: str) -> None: ...
    async def tool_complete(self, call_id: str, name: str, result: str,
                            error: str | None) -> None: ...


def _add_usage(total: dict[str, int], usage: dict[str, int]) -> None:
    add(total, usage)


def _assistant_message(c: Completion) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": c.text}
    if c.tool_calls:
        msg["tool_calls"] = [
            {"id": tc.id, "type": "function",
             "function": {"name": tc.name, "arguments": tc.arguments}}
            for tc in c.tool_calls
        ]
    return msg


async def _run_tool(tools: dict[str, Tool], name: str, arguments: str,
                    ctx: ToolContext) -> tuple[str, str | None]:
    tool = tools.get(name) or next(
        (t for t in tools.values() if t.stand_in and t.matches(name)), None)
    if tool is None:
        offered = sorted(n for n, t in tools.items() if not t.stand_in)
        err = f"unknown tool {name!r}; available: {', '.join(offered) or 'none'}"
        return orjson.dumps({"error": err}).decode(), err
    try:
        args = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        err = f"arguments of {name} are not valid JSON"
        return orjson.dumps({"error": err}).decode(), err
    if not isinstance(args, dict):
        err = f"arguments of {name} must be a JSON object"
        return orjson.dumps({"error": err}).decode(), err
    return await tool.run(args, ctx), None


async def run_agent(*, provider: Provider, model: str, reasoning: str | None,
                    messages: list[dict[str, Any]], tools: dict[str, Tool], max_turns: int,
                    sink: AgentSink, tool_context: Callable[[str], ToolContext],
                    budget: Budget | None = None,
                    result: AgentResult | None = None,
                    client_tools: list[dict[str, Any]] | None = None,
                    extras: dict[str, Any] | None = None) -> AgentResult:
    """Run the loop over ``messages`` (history plus the new user message).

    Appends what it produces to ``messages`` and reports it to ``sink.record``.
    Provider failures end the loop with exit_reason ``failed``; cancellation
    propagates to the caller. With ``budget``, a request that would pass it has its
    largest contents cut first (budget.squeeze; the sink has recorded them whole).
    ``result``, when given, is filled as the loop goes (its usage and api_calls
    count every request made), so a caller that is cancelled knows what was spent.
    ``client_tools`` (function schemas) are offered beside ``tools``: a call of
    one ends the loop (exit_reason ``tool_calls``) once the calls of our own
    tools in the same answer have run. ``extras`` go with every model request
    (``tool_choice`` with the first only: it asks for the next answer).
    """
    schemas = [t.schema() for t in tools.values() if not t.stand_in] \
        + list(client_tools or ()) or None
    theirs = {s["function"]["name"] for s in client_tools or ()}
    if result is None:
        result = AgentResult(text="", exit_reason="max_turns", model=model)
    result.exit_reason, result.model = "max_turns", model
    extra = dict(extras or {})
    for _ in range(max_turns):
        if budget is not None:
            squeeze(messages, schemas, budget)
        try:
            completion = await provider.complete(
                messages=messages, tools=schemas, model=model, reasoning=reasoning,
                on_delta=sink.delta, on_reasoning=sink.reasoning,
                **({"extras": extra} if extra else {}),
            )
            extra.pop("tool_choice", None)
        except ProviderError as exc:
            result.exit_reason = "failed"
            result.error = f"{exc.reason}: {exc.detail}"
            break
        result.api_calls += 1
        _add_usage(result.usage, completion.usage)
        result.last_usage = dict(completion.usage)
        assistant = _assistant_message(completion)
        messages.append(assistant)
        if not completion.tool_calls:
            await sink.record([assistant], final=True)
            result.text = completion.text or ""
            result.exit_reason = "completed"
            break
        await sink.record([assistant])
        replies = []
        for call in completion.tool_calls:
            if call.name in theirs:
                continue  # the client runs it, after this turn
            await sink.tool_start(call.id, call.name, call.arguments)
            text, error = await _run_tool(tools, call.name, call.arguments,
                                          tool_context(call.id))
            # the whole result: the sink cuts it to EVENT_RESULT_CHARS for the event
            await sink.tool_complete(call.id, call.name, text, error)
            replies.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                            "content": text})
        messages.extend(replies)
        await sink.record(replies)
        if calls := [c for c in assistant["tool_calls"] if c["function"]["name"] in theirs]:
            result.text = completion.text or ""
            result.tool_calls = calls
            result.exit_reason = "tool_calls"
            break
    else:
        result.error = f"stopped after {max_turns} model calls without a final answer"
    return result
