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


async def _answer(request: dict, writer: asyncio.StreamWriter) -> None:
    model = str(request.get("model") or "bench-model")
    usage = _usage(request)
    if not request.get("stream"):
        body = orjson.dumps({
            "id": "chatcmpl-bench", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": ANSWER}}],
            "usage": usage})
        writer.write(_head("200 OK", "application/json", len(body)) + body)
        return
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": model}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return _event({**base, "choices": [{"index": 0, "delta": delta,
                                            "finish_reason": finish}]})

    writer.write(_head("200 OK", "text/event-stream", None)
                 + chunk({"role": "assistant", "content": ""}))
    words = ANSWER.split(" ")
    for i, word in enumerate(words):
        await asyncio.sleep(0)  # one write per token, as a server that generates them
        writer.write(chunk({"content": word if i == 0 else " " + word}))
    tail = chunk({}, "stop")
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
