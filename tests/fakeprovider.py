"""A fake OpenAI-compatible chat-completions server for the test suite, over real HTTP.

Tests script the model with a handler function: it receives each parsed request body and
returns a reply (`Message`, `Status`, `Stall`, `RawSSE`, `Drip`, `Held`, or a plain
assistant-message dict). Each request runs on its own thread, so a handler may block (on
a `threading.Barrier`, say) while other requests proceed. The server answers in the shape
the request asked for: SSE chunks when ``stream`` is true, one JSON body otherwise. ``GET
/v1/models`` lists ``models`` (401 to a key other than ``api_key``, if set); other paths
are 404s, as on a real server. fakeservers.py wraps handlers to answer as real servers do.

    with FakeProvider(lambda req: text_reply("hi")) as fake:
        provider = OpenAIProvider(client, name="custom", base_url=fake.url, api_key=None)
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tether.daemon.delegation.tasks import CHILD_SYSTEM_PROMPT

__all__ = ["Drip", "FakeProvider", "Held", "Message", "RawSSE", "Reply", "Stall", "Status",
           "text_reply", "tool_call_reply"]


@dataclass
class Message:
    """A normal answer. ``stream`` overrides the request's own flag (None follows it);
    ``headers`` are sent as they are (say, a ``Content-Encoding`` the body does not have)."""

    message: dict
    usage: dict | None = None
    stream: bool | None = None
    headers: dict[str, str] | None = None


@dataclass
class Status:
    """An HTTP error answer with ``body`` and, optionally, a ``Retry-After`` header."""

    code: int
    body: str = '{"error": {"message": "fake provider error", "type": "fake"}}'
    retry_after: float | None = None


@dataclass
class Stall:
    """200 headers, then ``prefix`` (raw body bytes, e.g. some SSE events), then silence."""

    seconds: float
    prefix: bytes = b""


@dataclass
class RawSSE:
    """``data`` sent verbatim as a ``text/event-stream`` body; ``drop_next``: the next
    request on the connection is read and left unanswered, its connection closed (the
    client sees a server that closed a kept-alive connection behind its back)."""

    data: bytes
    drop_next: bool = False


@dataclass
class Drip:
    """200 event-stream headers, then ``line`` (an SSE comment) every ``interval`` seconds,
    never an event, until the client goes away or the fake stops."""

    interval: float
    line: bytes = b": keep-alive\n\n"


@dataclass
class Held:
    """A streamed answer: headers and the first ``before`` chunks at once, the rest only
    once ``gate`` is set (a test decides when the remainder goes out)."""

    message: dict
    gate: threading.Event
    before: int = 1


Reply = Message | Status | Stall | RawSSE | Drip | Held


def prompt_of(request: dict) -> str:
    """The text of the newest user message of a chat-completions request."""
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


def is_child(request: dict) -> bool:
    """Whether a request comes from a delegated child agent (its system prompt)."""
    messages = request.get("messages") or []
    return bool(messages) and messages[0].get("role") == "system" \
        and messages[0].get("content") == CHILD_SYSTEM_PROMPT


def text_reply(text: str) -> Message:
    """An assistant answer with plain text."""
    return Message({"role": "assistant", "content": text})


def tool_call_reply(name: str, arguments: dict, call_id: str = "call_1") -> Message:
    """An assistant answer with one function call."""
    call = {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}
    return Message({"role": "assistant", "content": None, "tool_calls": [call]})


def _words(value: Any) -> int:
    return len(value.split()) if isinstance(value, str) else 0


def _default_usage(request: dict, message: dict) -> dict:
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
    prompt = sum(_words(m.get("content")) for m in messages)
    completion = _words(message.get("content"))
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _split(text: str, parts: int) -> list[str]:
    """``text`` in ``parts`` consecutive non-empty pieces (fewer if it is short)."""
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse_events(request: dict, message: dict, usage: dict) -> list[dict]:
    """The chunk objects a streaming server would send for ``message``."""
    base = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": request.get("model", "fake"),
    }

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": ""})]
    for key in ("reasoning_content", "reasoning"):
        if message.get(key):
            events += [chunk({key: piece}) for piece in _split(message[key], 2)]
    if message.get("content"):
        events += [chunk({"content": piece}) for piece in _split(message["content"], 3)]
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function", {})
        head = {"index": index, "id": call.get("id"), "type": "function"}
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {**head, "function": {"name": function.get("name"), "arguments": ""}}
                    ]
                }
            )
        )
        for piece in _split(function.get("arguments") or "", 2):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    events.append(chunk({}, "tool_calls" if message.get("tool_calls") else "stop"))
    if (request.get("stream_options") or {}).get("include_usage"):
        events.append({**base, "choices": [], "usage": usage})
    return events


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    drop_next = False

    def handle_one_request(self) -> None:
        if self.drop_next:
            self.rfile.readline(65537)
            self.close_connection = True
            return
        super().handle_one_request()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Quiet: failures are recorded in FakeProvider.errors."""

    def do_GET(self) -> None:
        fake = self.server.fake
        with fake._lock:
            fake.gets.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        if self.path != "/v1/models":
            self._send(404, b'{"error": {"message": "not found"}}', "application/json")
        elif fake.api_key and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
            self._send(401, b'{"error": {"message": "invalid api key"}}', "application/json")
        else:
            listed = [m if isinstance(m, dict) else {"id": m, "object": "model",
                                                     "owned_by": "fake"} for m in fake.models]
            self._send(200, json.dumps({"object": "list", "data": listed}).encode(),
                       "application/json")

    def do_POST(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.path.endswith("/chat/completions"):
            self._send(404, b'{"error": {"message": "not found"}}', "application/json")
            return
        try:
            request = json.loads(raw)
        except ValueError:
            fake._record_error(f"request body is not JSON: {raw[:200]!r}")
            self._send(400, b'{"error": {"message": "bad json"}}', "application/json")
            return
        fake._record_request(request, {k.lower(): v for k, v in self.headers.items()})
        try:
            reply = fake.handler(request)
            if isinstance(reply, dict):
                reply = Message(reply)
            self._reply(request, reply)
            fake._record_answer()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
            self.close_connection = True
        except Exception:
            fake._record_error(traceback.format_exc())
            try:
                self._send(
                    500, b'{"error": {"message": "fake handler raised"}}', "application/json"
                )
            except OSError:
                self.close_connection = True

    def _reply(self, request: dict, reply: Reply) -> None:
        streaming = bool(request.get("stream"))
        if isinstance(reply, Status):
            headers = {} if reply.retry_after is None else {"Retry-After": f"{reply.retry_after:g}"}
            ctype = "application/json" if reply.body.lstrip().startswith("{") else "text/plain"
            self._send(reply.code, reply.body.encode(), ctype, headers)
        elif isinstance(reply, Message):
            usage = (
                reply.usage if reply.usage is not None else _default_usage(request, reply.message)
            )
            if reply.stream if reply.stream is not None else streaming:
                events = _sse_events(request, reply.message, usage)
                self._start_chunked("text/event-stream", reply.headers)
                for event in events:
                    self._chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
                self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")
            else:
                body = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "model": request.get("model", "fake"),
                    "choices": [
                        {
                            "index": 0,
                            "message": reply.message,
                            "finish_reason": "tool_calls"
                            if reply.message.get("tool_calls")
                            else "stop",
                        }
                    ],
                    "usage": usage,
                }
                self._send(200, json.dumps(body).encode(), "application/json", reply.headers)
        elif isinstance(reply, Stall):
            self._start_chunked("text/event-stream" if streaming else "application/json")
            if reply.prefix:
                self._chunk(reply.prefix)
            # Waiting on the stop event (not time.sleep) lets stop() release stalled threads.
            self.server.fake._stopping.wait(reply.seconds)
            self.close_connection = True  # end without the terminating chunk: a broken body
        elif isinstance(reply, RawSSE):
            self._start_chunked("text/event-stream")
            if reply.data:
                self._chunk(reply.data)
            self._chunk(b"")
            self.drop_next = reply.drop_next
        elif isinstance(reply, Drip):
            self._start_chunked("text/event-stream")
            while not self.server.fake._stopping.wait(reply.interval):
                self._chunk(reply.line)  # raises once the client has hung up
        elif isinstance(reply, Held):
            events = _sse_events(request, reply.message, _default_usage(request, reply.message))
            self._start_chunked("text/event-stream")
            for event in events[: reply.before]:
                self._chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
            reply.gate.wait(60)
            for event in events[reply.before :]:
                self._chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
        else:
            raise TypeError(f"handler returned {type(reply).__name__}, not a Reply or dict")

    def _send(
        self, code: int, body: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _start_chunked(self, ctype: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        """One chunk of a chunked body; the empty chunk ends the body."""
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeProvider

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # the client hung up on a kept-alive connection: nothing to report
        super().handle_error(request, client_address)


class FakeProvider:
    """A running fake provider at ``url`` (``http://127.0.0.1:PORT/v1``); use as a context manager."""

    def __init__(self, handler: Callable[[dict], Reply | dict], *,
                 models: tuple[str | dict, ...] = ("test-model",),
                 api_key: str | None = None) -> None:
        self.handler = handler
        self.models = models  # what GET /v1/models lists (a dict: that entry as it is)
        self.api_key = api_key  # the key GET /v1/models requires (None: any or none)
        self.gets: list[tuple[str, dict[str, str]]] = []  # (path, headers) of each GET
        self.requests: list[dict] = []
        self.request_headers: list[dict[str, str]] = []
        self.errors: list[str] = []
        self.answered = 0  # replies written out in full
        self.url = ""
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeProvider:
        """Bind an ephemeral loopback port and serve on a background thread."""
        if self._server is not None:
            raise RuntimeError("FakeProvider already started")
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        # A short poll interval keeps stop() quick.
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fake-provider",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket; stalled replies are released."""
        self._stopping.set()
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record_request(self, request: dict, headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(request)
            self.request_headers.append(headers)

    def _record_answer(self) -> None:
        with self._lock:
            self.answered += 1

    def _record_error(self, text: str) -> None:
        with self._lock:
            self.errors.append(text)
