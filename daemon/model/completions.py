"""Parsing OpenAI chat-completions responses: bodies and event streams in, `Completion` out.

No I/O: `parse_completion` reads a non-streaming body, `SSEDecoder` splits a
``text/event-stream`` into event data, `StreamAccumulator` folds the
``chat.completion.chunk`` events into one `Completion`, and `classify_status` /
`retry_after_seconds` read an HTTP failure. Everything that is wrong with a
response raises `AttemptFailed`; the HTTP shell (provider.py) decides whether to
retry and turns the last failure into a `ProviderError`. Testable without a server.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from .usage import normalise

__all__ = [
    "AttemptFailed",
    "Completion",
    "LineSplitter",
    "SSEDecoder",
    "StreamAccumulator",
    "wire_message",
    "ToolCall",
    "classify_status",
    "malformed",
    "parse_completion",
    "retry_after_seconds",
]


@dataclass
class ToolCall:
    """One function call requested by the model; ``arguments`` is the model's raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass
class Completion:
    """One assistant answer. ``text``/``reasoning`` are None when the model produced none."""

    text: str | None
    tool_calls: list[ToolCall]
    usage: dict[str, int]
    finish_reason: str | None
    reasoning: str | None
    model: str


class AttemptFailed(Exception):
    """One attempt failed; the retry loop decides whether to try again or raise ProviderError."""

    def __init__(
        self,
        reason: str,
        what: str,
        *,
        retryable: bool,
        status: int | None = None,
        body: str = "",
        retry_after: float | None = None,
        where: str = "",
    ) -> None:
        super().__init__(what)
        self.reason = reason
        self.what = what
        self.retryable = retryable
        self.status = status
        self.body = body
        self.retry_after = retry_after
        #: the URL asked and the likely fix, said after the body (a status failure's)
        self.where = where


def malformed(what: str) -> AttemptFailed:
    return AttemptFailed(
        "malformed_response", f"provider sent a malformed response ({what})", retryable=False
    )


def _embedded_error(obj: dict) -> AttemptFailed:
    # vLLM, OpenRouter and others report failures as {"error": {...}} with HTTP 200,
    # sometimes mid-stream; the server failed, so treat it like a 5xx.
    err = obj.get("error")
    message = err.get("message") if isinstance(err, dict) else err
    return AttemptFailed(
        "server_error", "provider reported an error", retryable=True, body=str(message)
    )


def _int_usage(raw: Any) -> dict[str, int]:
    """The counters of a usage object, cached and reasoning tokens included (usage.py)."""
    return normalise(raw)


def _arguments_text(raw: Any) -> str:
    # Some servers (Ollama among them) send arguments as an object rather than JSON text,
    # and no-argument calls sometimes arrive as "": normalise both to JSON text.
    if raw is None or raw == "":
        return "{}"
    if isinstance(raw, str):
        return raw
    return orjson.dumps(raw).decode()


def parse_completion(body: Any, requested_model: str) -> Completion:
    """Parse a non-streaming ``chat.completion`` body (``choices[0].message``)."""
    if not isinstance(body, dict):
        raise malformed("body is not a JSON object")
    choices = body.get("choices")
    if not choices and "error" in body:
        raise _embedded_error(body)
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise malformed("no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise malformed("choices[0].message is missing")
    tool_calls = []
    for position, raw in enumerate(message.get("tool_calls") or []):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            raise malformed(f"tool call {position} has no function name")
        tool_calls.append(
            ToolCall(
                id=str(raw.get("id") or f"call_{position}"),
                name=str(function["name"]),
                arguments=_arguments_text(function.get("arguments")),
            )
        )
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return Completion(
        text=message.get("content") or None,
        tool_calls=tool_calls,
        usage=_int_usage(body.get("usage")),
        finish_reason=choices[0].get("finish_reason"),
        reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
        model=str(body.get("model") or requested_model),
    )


_EOL = re.compile(r"\r\n|\r|\n")


class LineSplitter:
    """Splits decoded text, fed in arbitrary pieces, into lines without terminators.

    Only CR, LF and CRLF end a line (the event-stream rules), never the other
    characters ``str.splitlines`` knows, which may sit inside a JSON string. A CR
    at the end of a piece waits for the next one, which may start with its LF.
    Text with no line end is kept as pieces and joined once, so one long line
    costs its length, not its length squared.
    """

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self.pending = 0  # characters of the line not ended yet

    def feed(self, text: str) -> list[str]:
        if "\n" not in text and "\r" not in text:
            if text:
                self._pieces.append(text)
                self.pending += len(text)
            return []
        self._pieces.append(text)
        pending = "".join(self._pieces)
        lines: list[str] = []
        start = 0
        for match in _EOL.finditer(pending):
            if match.group() == "\r" and match.end() == len(pending):
                break  # maybe the first half of a CRLF
            lines.append(pending[start:match.start()])
            start = match.end()
        rest = pending[start:]
        self._pieces = [rest] if rest else []
        self.pending = len(rest)
        return lines

    def flush(self) -> str | None:
        """The last line, if the text did not end with a line end."""
        rest = "".join(self._pieces)
        self._pieces = []
        self.pending = 0
        if not rest:
            return None
        return rest[:-1] if rest.endswith("\r") else rest


class SSEDecoder:
    """Turns the lines of a ``text/event-stream`` body into the data of each event.

    Follows the WHATWG event-stream rules that matter here: ``data:`` lines of one event are
    joined with newlines, a blank line ends the event, lines starting with ``:`` are comments
    (keep-alives), and other fields (``event:``, ``id:``) are ignored.
    """

    def __init__(self) -> None:
        self._data: list[str] = []
        self.pending = 0  # characters of data held for an event not ended yet

    def feed_line(self, line: str) -> str | None:
        """Consume one line (without its terminator); return an event's data when it ends."""
        if line == "":
            return self.flush()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if name == "data":
            value = value[1:] if value.startswith(" ") else value
            self._data.append(value)
            self.pending += len(value) + 1
        return None

    def flush(self) -> str | None:
        """Return the pending event's data, if any (a stream may end without a blank line)."""
        if not self._data:
            return None
        data = "\n".join(self._data)
        self._data = []
        self.pending = 0
        return data


@dataclass
class _ToolSlot:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamAccumulator:
    """Folds ``chat.completion.chunk`` objects into one `Completion`."""

    def __init__(self, requested_model: str) -> None:
        self.model = requested_model
        self.done = False
        self._saw_choice = False
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._tools: dict[int, _ToolSlot] = {}
        self._usage: dict[str, int] = {}
        self._finish_reason: str | None = None
        self.size = 0  # characters collected: text, reasoning, tool names and arguments

    def add(self, data: str) -> tuple[str | None, str | None]:
        """Consume one event's data; return the (text, reasoning) deltas it carried."""
        if data.strip() == "[DONE]":
            self.done = True
            return None, None
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise malformed(f"bad JSON in event stream: {data[:80]!r}") from None
        if not isinstance(chunk, dict):
            raise malformed("stream chunk is not a JSON object")
        if "error" in chunk and not chunk.get("choices"):
            raise _embedded_error(chunk)
        if chunk.get("model"):
            self.model = str(chunk["model"])
        if chunk.get("usage"):
            self._usage = _int_usage(chunk["usage"])
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise malformed("stream chunk choices is not a list")
        text = reasoning = None
        for choice in choices:
            # n=1 is all we ask for; a server that sends other indices is ignored for them.
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            self._saw_choice = True
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise malformed("stream chunk delta is not an object")
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._text.append(content)
                self.size += len(content)
                text = content
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str) and thought:
                self._reasoning.append(thought)
                self.size += len(thought)
                reasoning = thought
            self._add_tool_fragments(delta.get("tool_calls") or [])
        return text, reasoning

    def _add_tool_fragments(self, fragments: Any) -> None:
        if not isinstance(fragments, list):
            raise malformed("delta.tool_calls is not a list")
        for position, fragment in enumerate(fragments):
            if not isinstance(fragment, dict):
                raise malformed("tool call fragment is not an object")
            # Some servers omit `index` when they send each call whole; fall back to position.
            index = fragment.get("index", position)
            slot = self._tools.setdefault(
                index if isinstance(index, int) else position, _ToolSlot()
            )
            if fragment.get("id") and not slot.id:
                slot.id = str(fragment["id"])
            function = fragment.get("function") or {}
            name = function.get("name")
            # The name normally arrives once; some servers repeat it in every fragment.
            if isinstance(name, str) and name and name != slot.name:
                slot.name += name
                self.size += len(name)
            arguments = function.get("arguments")
            if arguments is not None:
                piece = arguments if isinstance(arguments, str) else _arguments_text(arguments)
                slot.arguments.append(piece)
                self.size += len(piece)

    def result(self) -> Completion:
        """The finished answer; raises if the stream ended before the model finished."""
        if not self._saw_choice:
            raise malformed("event stream ended without any choice")
        if not self.done and self._finish_reason is None:
            raise malformed("event stream ended before [DONE]")
        tool_calls = []
        for position, index in enumerate(sorted(self._tools)):
            slot = self._tools[index]
            if not slot.name:
                raise malformed(f"streamed tool call {index} has no function name")
            tool_calls.append(
                ToolCall(
                    id=slot.id or f"call_{position}",
                    name=slot.name,
                    arguments=_arguments_text("".join(slot.arguments)),
                )
            )
        return Completion(
            text="".join(self._text) or None,
            tool_calls=tool_calls,
            usage=self._usage,
            finish_reason=self._finish_reason,
            reasoning="".join(self._reasoning) or None,
            model=self.model,
        )


def classify_status(code: int) -> tuple[str, bool]:
    """HTTP status -> (reason, retryable)."""
    if code == 429:
        return "rate_limited", True
    if code in (401, 403):
        return "auth_failed", False
    if code == 404:
        return "not_found", False
    if code == 408:
        return "timeout", True
    if code >= 500:
        return "server_error", True
    return "bad_request", False


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds from a numeric Retry-After header; HTTP-date forms fall back to our backoff."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def wire_message(message: dict) -> dict:
    """A transcript message as every server takes it: an assistant message without text
    (one that only calls tools) says ``"content": ""``, not ``null``. OpenAI takes
    either; llama-cpp-python's server refuses ``null`` and its tool-calling template
    needs the key, so neither null nor leaving it out works there."""
    if message.get("role") != "assistant" or message.get("content") is not None:
        return message
    return {**message, "content": ""}
