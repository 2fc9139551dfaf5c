"""Model servers as they behave, for the fake provider (tests/fakeprovider.py).

Each function wraps a handler (request → reply, as `FakeProvider` takes) and answers the
way one real server does where it differs from the OpenAI API:

- `llama_cpp_python`: llama-cpp-python's server (0.3.36) with ``--chat_format
  chatml-function-calling``. A streamed request that carries tools (automatic tool
  choice) gets 200 and an event stream that ends empty (the server logs "Automatic
  streaming tool choice is not supported"), and the server drops the connection the
  client keeps for its next request; without ``stream`` it answers, tool calls
  included. (Seen with curl against the real server, tests/realmodel/.)
- `error_mid_stream`: a server that fails after it began the stream: the role chunk, then
  an ``{"error": ...}`` event with code 500, then the end; a plain request is answered.
- `refuses_stream`: a server that answers a streamed request with tools by a 400 whose
  message says streaming is not supported.
- `ollama`: Ollama's tool calls: the whole call (arguments as an object, no ``index``)
  in one chunk, then the finish chunk.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from fakeprovider import Message, RawSSE, Reply, Status

__all__ = ["error_mid_stream", "llama_cpp_python", "ollama", "refuses_stream"]

Handler = Callable[[dict], Reply | dict]


def _chunk(request: dict, delta: dict, finish: str | None = None) -> bytes:
    event = {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
             "model": request.get("model", "fake"),
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def _streamed_with_tools(request: dict) -> bool:
    return bool(request.get("stream")) and bool(request.get("tools"))


def llama_cpp_python(handler: Handler) -> Handler:
    def answer(request: dict) -> Reply | dict:
        if _streamed_with_tools(request):
            return RawSSE(b"", drop_next=True)
        return handler(request)
    return answer


def error_mid_stream(handler: Handler) -> Handler:
    def answer(request: dict) -> Reply | dict:
        if request.get("stream"):
            error = {"error": {"message": "internal error while generating", "code": 500}}
            return RawSSE(_chunk(request, {"role": "assistant"})
                          + b"data: " + json.dumps(error).encode() + b"\n\n")
        return handler(request)
    return answer


def refuses_stream(handler: Handler) -> Handler:
    def answer(request: dict) -> Reply | dict:
        if _streamed_with_tools(request):
            return Status(400, json.dumps({"error": {
                "message": "Streaming is not supported with tools", "type": "invalid_request"}}))
        return handler(request)
    return answer


def ollama(handler: Handler) -> Handler:
    """Tool calls in one chunk each; text and everything else as the fake streams it."""
    def answer(request: dict) -> Reply | dict:
        reply = handler(request)
        message = reply.message if isinstance(reply, Message) else reply
        if not (request.get("stream") and isinstance(message, dict)
                and message.get("tool_calls")):
            return reply
        calls = [{"id": call.get("id"), "type": "function",
                  "function": {"name": call["function"]["name"],
                               "arguments": json.loads(call["function"]["arguments"] or "{}")}}
                 for call in message["tool_calls"]]
        return RawSSE(_chunk(request, {"role": "assistant", "content": "",
                                       "tool_calls": calls})
                      + _chunk(request, {}, "tool_calls") + b"data: [DONE]\n\n")
    return answer
