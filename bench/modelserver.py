"""The bench's model server: an OpenAI-compatible endpoint that answers at once.

``python -m tether.bench --serve-model PORTFILE`` listens on 127.0.0.1 (a free
port, written to PORTFILE once it listens) and speaks HTTP/1.1 with keep-alive,
as vLLM, llama.cpp's server or Ollama do: ``POST /v1/chat/completions`` answers
a streamed request with a ``text/event-stream`` body in chunked encoding, one
``chat.completion.chunk`` event per chunk (the role, `ANSWER`'s words one by
one, the finish, the usage when asked, ``[DONE]``), each written on its own and
the loop given a turn between them, the way a server writes tokens as they are
made; a plain request gets one ``chat.completion`` body. ``GET /v1/models``
lists the model asked for with a context length. Nothing is generated: the
time a turn takes against it is the owner's model client and the network
stack, which is what the ``http_turns`` phase measures.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import orjson

__all__ = ["ANSWER", "serve_model", "serve_model_process"]

#: what the model answers, streamed one word per event
ANSWER = "ok, the bench model answers at once"
#: the context length ``GET /v1/models`` reports
CONTEXT_LENGTH = 32768
#: a prompt that starts with this fans out: the model's first answer delegates
#: `FANOUT_TASKS` tasks (``delegate_task``), its answer after their results is
#: `FANNED_OUT`; the helpers' own prompts get `ANSWER`
FANOUT = "fan out:"
FANOUT_TASKS = 3
FANNED_OUT = "fanned out: the helpers answered"
#: what the server has answered so far, by kind (``GET /v1/bench/counts``): a
#: comparison checks that a fan-out really delegated and its helpers asked
COUNTS = {"answers": 0, "delegations": 0, "fanned_out": 0}


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(obj: object) -> bytes:
    return _chunked(b"data: " + orjson.dumps(obj) + b"\n\n")


def _usage(request: dict) -> dict[str, int]:
    prompt = sum(len(str(m.get("content") or "")) // 4 for m in request.get("messages") or []
                 if isinstance(m, dict))
    completion = len(ANSWER) // 4
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _head(status: str, ctype: str, length: int | None) -> bytes:
    size = (b"Content-Length: %d\r\n" % length if length is not None
            else b"Transfer-Encoding: chunked\r\n")
    return (b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: " + ctype.encode()
            + b"\r\n" + size + b"Connection: keep-alive\r\n\r\n")


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return str(content or "")


def _reply(request: dict) -> str | dict:
    """What the model says: a text, or (a dict) the ``delegate_task`` call's arguments."""
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
    first = next((_text(m) for m in messages if m.get("role") == "user"), "")
    tools = {(t.get("function") or {}).get("name") for t in request.get("tools") or []
             if isinstance(t, dict)}
    if FANOUT not in first.lower() or "delegate_task" not in tools:
        COUNTS["answers"] += 1
        return ANSWER
    if any(m.get("role") == "tool" for m in messages):
        COUNTS["fanned_out"] += 1
        return FANNED_OUT
    COUNTS["delegations"] += 1
    return {"tasks": [{"goal": f"part {i + 1} of {FANOUT_TASKS}: answer in one line"}
                      for i in range(FANOUT_TASKS)]}


async def _answer(request: dict, writer: asyncio.StreamWriter) -> None:
    model = str(request.get("model") or "bench-model")
    usage = _usage(request)
    reply = _reply(request)
    call = None if isinstance(reply, str) else {
        "id": "call_bench", "type": "function",
        "function": {"name": "delegate_task", "arguments": orjson.dumps(reply).decode()}}
    finish = "stop" if call is None else "tool_calls"
    if not request.get("stream"):
        message: dict = ({"role": "assistant", "content": reply} if call is None
                         else {"role": "assistant", "content": None, "tool_calls": [call]})
        body = orjson.dumps({
            "id": "chatcmpl-bench", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": usage})
        writer.write(_head("200 OK", "application/json", len(body)) + body)
        return
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": model}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return _event({**base, "choices": [{"index": 0, "delta": delta,
                                            "finish_reason": finish}]})

    writer.write(_head("200 OK", "text/event-stream", None)
                 + chunk({"role": "assistant", "content": ""}))
    if call is not None:
        writer.write(chunk({"tool_calls": [{"index": 0, **call}]}))
    else:
        for i, word in enumerate(str(reply).split(" ")):
            await asyncio.sleep(0)  # one write per token, as a server that generates them
            writer.write(chunk({"content": word if i == 0 else " " + word}))
    tail = chunk({}, finish)
    if (request.get("stream_options") or {}).get("include_usage"):
        tail += _event({**base, "choices": [], "usage": usage})
    writer.write(tail + _chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n")


async def _connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = await reader.readexactly(length) if length else b""
            if method == "POST" and path.endswith("/chat/completions"):
                await _answer(orjson.loads(body), writer)
            elif method == "GET" and path.endswith("/bench/counts"):
                counts = orjson.dumps(COUNTS)
                writer.write(_head("200 OK", "application/json", len(counts)) + counts)
            elif method == "GET" and path.endswith("/models"):
                listed = orjson.dumps({"object": "list", "data": [
                    {"id": "bench-model", "object": "model", "owned_by": "bench",
                     "max_model_len": CONTEXT_LENGTH}]})
                writer.write(_head("200 OK", "application/json", len(listed)) + listed)
            else:
                missing = b'{"error": {"message": "not found"}}'
                writer.write(_head("404 Not Found", "application/json", len(missing)) + missing)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError,
            asyncio.CancelledError):  # the client went, or the server stops
        pass
    finally:
        writer.close()


async def serve_model(port_file: Path) -> asyncio.Server:
    """Listen on 127.0.0.1 at a free port; write the port to ``port_file`` (whole)."""
    server = await asyncio.start_server(_connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(port))
    tmp.replace(port_file)
    return server


def serve_model_process(port_file: str) -> int:
    """The model server as a process: serve until SIGTERM."""
    async def run() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        server = await serve_model(Path(port_file))
        await stop.wait()
        server.close()

    asyncio.run(run())
    return 0
