"""Fuzzing the real owner's wire: thousands of generated frames, one owner for the module.

Every frame must get a JSON-RPC error reply (or, for a framing violation, a clean
close: 1009 for an oversize frame, 1007 for invalid UTF-8 in a text frame); the
owner must keep serving; and since every request sent here is invalid (or names
a session/admission that does not exist), no row may be written.

The expected answer of each request comes from an oracle built from the protocol
rules (docs/protocol.md §1) and the params models themselves, applied to the
frame exactly as the owner parses it (orjson), so the owner must agree with its
own documentation on every generated input.

About 2000 examples run by default in well under a minute; set
``TETHER_FUZZ_EXAMPLES`` (e.g. 50000) for a long run (20000 take ~6 minutes).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from pathlib import Path
from typing import Any

import orjson
import pgstore
import pytest
from harness import OwnerProcess, clean_env, table_counts, write_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, unix_connect

from tether.rpc.methods import METHODS

TOTAL = int(os.environ.get("TETHER_FUZZ_EXAMPLES", "2000"))
# a long run (TETHER_FUZZ_EXAMPLES=50000) needs more than the suite's default timeout
pytestmark = pytest.mark.timeout(max(180, TOTAL // 20))
FRAME_LIMIT = 4 * 1024 * 1024  # the default daemon.max_frame_bytes
PING_EVERY = 200  # exchanges between pings on a fresh connection
REPLY_TIMEOUT = 15.0
WRITERS = {"session.create", "token.create", "runtime.shutdown",
           "session.rename", "session.delete", "session.prune", "session.fork",
           "session.compact", "cron.create", "mcp.attach", "runtime.listen_tcp", "fs.offer",
           "terminal.offer"}
NEVER_FAKE = "ses_000000000000000000000000"  # a well-formed session id that does not exist
ABSENT = object()  # "leave params out"


def examples(share: float) -> settings:
    return settings(max_examples=max(10, int(TOTAL * share)), deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


def on_fresh_connection_after_failure(wire: Wire) -> Any:
    """Decorator: a failed example drops the shared connection, so a reply it left
    unread cannot be mistaken for the answer to the next example."""
    def decorate(fn: Any) -> Any:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except BaseException:
                wire.close()
                raise
        return run
    return decorate


# --------------------------------------------------------------------------- the wire


class Wire:
    """One shared raw connection (reopened after a close) plus liveness checks."""

    def __init__(self, home: Path) -> None:
        self.socket = str(home / "daemon.sock")
        self.sid = ""  # the module's one real session
        self.baseline: dict[str, int] = {}  # row counts of every table before fuzzing
        self.owner: OwnerProcess | None = None
        self.url: str | None = None  # the PostgreSQL schema's URL, on that backend
        self.ws: ClientConnection | None = None
        self.exchanges = 0
        self.closes: dict[int | None, int] = {}

    def _open(self) -> ClientConnection:
        with contextlib.ExitStack() as stack:
            # no keepalive pings: their payload comes from `random`, which hypothesis
            # (rightly) reports when another thread touches it during a draw
            ws = stack.enter_context(unix_connect(self.socket, max_size=None,
                                                  open_timeout=REPLY_TIMEOUT,
                                                  ping_interval=None))
            stack.pop_all()
        return ws

    @property
    def conn(self) -> ClientConnection:
        if self.ws is None:
            self.ws = self._open()
        return self.ws

    def _tick(self) -> None:
        self.exchanges += 1
        if self.exchanges % PING_EVERY == 0:
            self.check_alive()

    def exchange(self, frame: str | bytes, *, text: bool = True) -> Any:
        """Send one frame; return its parsed reply, or ("closed", code) on a close."""
        self._tick()
        ws = self.conn
        try:
            ws.send(frame, text=text)
            raw = ws.recv(timeout=REPLY_TIMEOUT)
        except ConnectionClosed:
            return self._closed(ws)
        except TimeoutError:
            raise AssertionError(f"no reply within {REPLY_TIMEOUT}s to {frame[:300]!r}") from None
        return json.loads(raw)

    def exchange_silent(self, frame: str) -> None:
        """Send a frame that must not be answered (a notification), then a ping."""
        self._tick()
        ws = self.conn
        ws.send(frame)
        ws.send('{"jsonrpc":"2.0","id":"sentinel","method":"ping"}')
        reply = json.loads(ws.recv(timeout=REPLY_TIMEOUT))
        assert reply == {"jsonrpc": "2.0", "id": "sentinel", "result": {"pong": True}}, \
            f"a notification was answered: {frame[:300]!r} -> {reply}"

    def _closed(self, ws: ClientConnection) -> tuple[str, int | None]:
        code = ws.close_code
        self.closes[code] = self.closes.get(code, 0) + 1
        with contextlib.suppress(Exception):
            ws.close()
        self.ws = None
        return ("closed", code)

    def check_alive(self) -> None:
        """The owner still serves: a ping on a fresh connection."""
        with unix_connect(self.socket, open_timeout=REPLY_TIMEOUT, ping_interval=None) as ws:
            ws.send('{"jsonrpc":"2.0","id":1,"method":"ping"}')
            assert json.loads(ws.recv(timeout=REPLY_TIMEOUT))["result"] == {"pong": True}

    def close(self) -> None:
        if self.ws is not None:
            with contextlib.suppress(Exception):
                self.ws.close()
            self.ws = None


@pytest.fixture(scope="module")
def owners(tmp_path_factory):
    """One owner per backend for the whole module (started when a test first needs
    it), each with one real session and its row counts."""
    started: dict[str, Wire] = {}
    with contextlib.ExitStack() as stack:

        def get(backend: str) -> Wire:
            if backend not in started:
                home = tmp_path_factory.mktemp(f"fuzz-{backend}") / "home"
                write_config(home)
                url = (stack.enter_context(pgstore.fresh_schema())
                       if backend == "postgresql" else None)
                env = clean_env(home, **({"TETHER_STORE": url} if url else {}))
                owner = stack.enter_context(OwnerProcess(home, env=env))
                wire = Wire(home)
                stack.callback(wire.close)
                reply = wire.exchange('{"jsonrpc":"2.0","id":1,"method":"session.create",'
                                      '"params":{"title":"fuzz target"}}')
                wire.sid = reply["result"]["session_id"]
                wire.close()  # the creator stays subscribed otherwise: start from a clean one
                wire.url = url
                wire.baseline = table_counts(home, url)
                wire.owner = owner
                started[backend] = wire
            return started[backend]

        yield get
        for wire in started.values():
            assert wire.owner.alive


@pytest.fixture
def fuzz(owners, store):
    return owners(store)


@pytest.fixture
def wire(fuzz):
    yield fuzz
    fuzz.check_alive()
    assert fuzz.owner is not None and fuzz.owner.alive
    assert table_counts(fuzz.owner.home, fuzz.url) == fuzz.baseline, \
        "an invalid request wrote a row"


# --------------------------------------------------------------------------- the oracle

_REQUEST_KEYS = {"jsonrpc", "id", "method", "params"}


def expect(msg: Any) -> str | None:
    """The reason the owner must answer ``msg`` (one parsed request) with, or None
    for a notification that must not be answered, or "ok" for a valid request
    (answered with a result or any reason but internal_error)."""
    if type(msg) is not dict:
        return "invalid_request"
    rid = msg.get("id")
    if rid is not None and type(rid) not in (str, int):
        return "invalid_request"
    if msg.get("jsonrpc") != "2.0" or type(msg.get("method")) is not str:
        return "invalid_request"
    if not _REQUEST_KEYS.issuperset(msg):
        return "invalid_request"
    params = msg.get("params", {})
    if type(params) not in (dict, list):
        return "invalid_request"
    silent = "id" not in msg
    method = METHODS.get(msg["method"])
    if method is None:
        return None if silent else "method_not_found"
    if type(params) is list:
        return None if silent else "invalid_params"
    try:
        method.params.model_validate(params)
    except ValidationError:
        return None if silent else "invalid_params"
    assert not silent, "a valid notification would run; the generator must not send one"
    return "ok"


def as_parsed(obj: Any) -> Any:
    """``obj`` as the owner sees it after orjson parses the frame (big ints become floats)."""
    return orjson.loads(json.dumps(obj))


def check_reply(reply: Any, msg: Any, want: str) -> None:
    """``reply`` answers the parsed request ``msg`` as ``want`` (see ``expect``) says."""
    assert isinstance(reply, dict), reply
    assert reply.get("jsonrpc") == "2.0", reply
    # the id is echoed when it is a valid one, else it is null
    rid = msg.get("id") if type(msg) is dict else None
    assert reply["id"] == (rid if type(rid) in (str, int) else None), (reply, msg)
    if "result" in reply:
        assert want == "ok", f"{want} expected, got a result for {msg!r:.300}"
        return
    err = reply["error"]
    assert set(err) == {"code", "message", "data"}, err
    assert err["message"] == err["data"]["reason"], err
    assert isinstance(err["code"], int) and isinstance(err["data"]["detail"], str)
    assert err["message"] != "internal_error", f"internal error for {msg!r:.300}: {err}"
    if want == "ok":
        assert err["message"] in {"not_found", "invalid_params"}, err
    else:
        assert err["message"] == want, f"{want} expected for {msg!r:.300}, got {err}"


# --------------------------------------------------------------------------- generators

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30))
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12)
id_values = st.one_of(st.integers(-(2**65), 2**65), st.text(min_size=1, max_size=30),
                      st.sampled_from(["x" * 200, "x" * 201, "", "\u0000", "ses_"]))
request_ids = st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=20), st.none())


def valid_field(name: str, sid: str) -> st.SearchStrategy[Any]:
    """A value the params models accept for ``name`` (used before mutation)."""
    ids = st.one_of(st.just(NEVER_FAKE), st.text(min_size=1, max_size=20))
    table: dict[str, st.SearchStrategy[Any]] = {
        "session_id": st.one_of(st.just(sid), ids),
        "admission_id": ids, "input_id": ids, "request_id": ids,
        "text": st.text(max_size=40), "finite": st.booleans(), "label": st.text(max_size=20),
        "after_seq": st.integers(0, 2**62), "limit": st.integers(1, 500),
        "cursor": st.text(max_size=60),
        "provider": st.sampled_from(["demo", "custom", "openai", "nope"]),
        "model": st.text(max_size=20), "base_url": st.text(max_size=30),
        "toolsets": st.lists(st.sampled_from(["delegation", "web", ""]), max_size=3),
        "reasoning": st.sampled_from(["none", "low", "medium", "high"]),
        "max_turns": st.integers(1, 200), "ignore_rules": st.booleans(),
        "source": st.sampled_from(["cli", "editor", "api"]), "title": st.text(max_size=20),
        "cwd": st.text(max_size=20),
        "attachments": st.lists(st.fixed_dictionaries(
            {"name": st.text(min_size=1, max_size=10), "content": st.text(max_size=20)}),
            max_size=2),
    }
    return table.get(name, json_value)


@st.composite
def params_for(draw: Any, name: str, sid: str) -> Any:
    """Valid-looking params for method ``name``, then 0..3 mutations."""
    fields = METHODS[name].params.model_fields
    params: dict[str, Any] = {}
    for fname, info in fields.items():
        if info.is_required() or draw(st.booleans()):
            params[fname] = draw(valid_field(fname, sid))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(
            ["drop", "extra", "retype", "bool_int", "edge_int", "long_str", "null"]))
        keys = sorted(params) or sorted(fields) or ["x"]
        key = draw(st.sampled_from(keys))
        if kind == "drop":
            params.pop(key, None)
        elif kind == "extra":
            params[draw(st.text(max_size=12).filter(lambda k: k not in fields))] = \
                draw(json_value)
        elif kind == "retype":
            params[key] = draw(json_value)
        elif kind == "bool_int":
            params[key] = draw(st.sampled_from([True, False, 0, 1, "true", "1", 1.0]))
        elif kind == "edge_int":
            params[key] = draw(st.sampled_from(
                [-1, -(2**63), 2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**30, 0]))
        elif kind == "long_str":
            params[key] = "y" * draw(st.sampled_from([64, 65, 200, 201, 257, 1025, 4097]))
        else:
            params[key] = None
    shape = draw(st.sampled_from(["object"] * 12 + ["absent", "list", "string", "null", "int"]))
    return {"object": params, "absent": ABSENT, "list": list(params.values()),
            "string": "params", "null": None, "int": 7}[shape]


@st.composite
def requests(draw: Any, sid: str, *, allow_notifications: bool = True) -> dict[str, Any]:
    name = draw(st.sampled_from(sorted(METHODS)))
    params = draw(params_for(name, sid))
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": name}
    if params is not ABSENT:
        msg["params"] = params
    if not allow_notifications or draw(st.integers(0, 9)):
        msg["id"] = draw(request_ids)
    envelope = draw(st.integers(0, 14))
    if envelope == 0:
        msg["jsonrpc"] = draw(st.sampled_from(["1.0", 2.0, None, "2.0 "]))
    elif envelope == 1:
        msg["method"] = draw(st.one_of(json_value, st.text(max_size=30)))
    elif envelope == 2:
        msg[draw(st.sampled_from(["param", "Params", "extra", "ID"]))] = draw(json_value)
    elif envelope == 3:
        msg["id"] = draw(st.one_of(st.booleans(), st.floats(allow_nan=False,
                                                            allow_infinity=False),
                                   st.lists(st.integers(), max_size=2), st.just({})))
    elif envelope == 4:
        del msg["jsonrpc"]
    return msg


def make_safe(msg: dict[str, Any], sid: str) -> dict[str, Any]:
    """Make sure ``msg`` cannot write: a request that would run a writing method
    validly gets an unknown params key (so it must be refused)."""
    parsed = as_parsed(msg)
    if expect_lenient(parsed) != "ok":
        return msg
    params = parsed.get("params") or {}
    writes = parsed["method"] in WRITERS or (
        parsed["method"] == "prompt.submit" and params.get("session_id") == sid)
    if writes:
        msg = {**msg, "params": {**(msg.get("params") or {}), "fuzz_unknown_key": 1}}
    return msg


def expect_lenient(msg: Any) -> str | None:
    """``expect``, but a valid notification counts as "ok" (it is made safe below)."""
    if type(msg) is dict and "id" not in msg:
        return expect({**msg, "id": 0})
    return expect(msg)


def silence_safe(msg: dict[str, Any]) -> dict[str, Any]:
    """A valid notification would run and never say so; give it an id instead."""
    if "id" not in msg and expect_lenient(as_parsed(msg)) == "ok":
        return {**msg, "id": "was-a-notification"}
    return msg


def send_request(wire: Wire, msg: dict[str, Any]) -> None:
    msg = silence_safe(make_safe(msg, wire.sid))
    parsed = as_parsed(msg)
    want = expect(parsed)
    frame = json.dumps(msg)
    if want is None:
        wire.exchange_silent(frame)
        return
    reply = wire.exchange(frame)
    assert not isinstance(reply, tuple), f"connection closed by {frame[:300]!r}: {reply}"
    check_reply(reply, parsed, want)


# --------------------------------------------------------------------------- the suites


def test_random_frames(wire):
    """Random bytes, random text, random JSON values: an error reply (or 1007) each."""
    frames = st.one_of(
        st.binary(max_size=300).map(lambda b: (b, False)),
        st.text(max_size=300).map(lambda t: (t, True)),
        json_value.map(lambda v: (json.dumps(v), True)),
        st.binary(min_size=1, max_size=100).map(lambda b: (b + b"\xff\xfe", True)),
    )

    @examples(0.25)
    @given(frames)
    @on_fresh_connection_after_failure(wire)
    def run(item: tuple[str | bytes, bool]) -> None:
        frame, text = item
        reply = wire.exchange(frame, text=text)
        if isinstance(reply, tuple):
            # only a text frame of invalid UTF-8 may be refused by closing (1007)
            assert text and isinstance(frame, bytes), (frame, reply)
            with pytest.raises(UnicodeDecodeError):
                frame.decode("utf-8")
            assert reply == ("closed", 1007)
            return
        if not text:
            # binary frames are refused, never run: invalid_request under each id
            for member in reply if isinstance(reply, list) else [reply]:
                assert member["error"]["message"] == "invalid_request", member
            return
        try:
            parsed: Any = orjson.loads(frame)
        except orjson.JSONDecodeError as exc:
            members = reply if isinstance(reply, list) else [reply]
            for member in members:
                assert member["error"]["message"] == "parse_error", reply
            if "surrogate" not in str(exc):  # a lone surrogate's reply keeps the id
                assert reply["id"] is None, reply
            return
        if type(parsed) is list:
            if not parsed:
                assert reply["error"]["message"] == "invalid_request"
                return
            assert isinstance(reply, list | dict), reply
            members = reply if isinstance(reply, list) else [reply]
            for member in members:
                assert member["error"]["message"] != "internal_error", member
            return
        check_reply(reply, parsed, expect(parsed) or "invalid_request")

    run()


def test_every_method_with_mutated_params(wire):
    """Each method of the table, with params that miss keys, add keys, change types,
    swap bools and ints, push ints to the edges, and strings past their bounds."""

    @examples(0.45)
    @given(requests(wire.sid))
    @on_fresh_connection_after_failure(wire)
    def run(msg: dict[str, Any]) -> None:
        send_request(wire, msg)

    run()


def test_batches(wire):
    """Batches of mutated requests, empty batches and oversize ones."""

    @st.composite
    def batches(draw: Any) -> list[Any]:
        kind = draw(st.sampled_from(["normal"] * 6 + ["empty", "oversize", "junk"]))
        if kind == "empty":
            return []
        member = requests(wire.sid, allow_notifications=True)
        if kind == "oversize":
            one = draw(member)
            return [one] * draw(st.integers(101, 160))
        if kind == "junk":
            return draw(st.lists(json_value, min_size=1, max_size=6))
        return draw(st.lists(member, min_size=1, max_size=12))

    @examples(0.15)
    @given(batches())
    @on_fresh_connection_after_failure(wire)
    def run(batch: list[Any]) -> None:
        safe = []
        for i, msg in enumerate(batch):
            if type(msg) is dict:
                msg = silence_safe(make_safe(msg, wire.sid))
                if "id" in msg and type(as_parsed(msg)["id"]) in (str, int):
                    msg = {**msg, "id": i}  # unique ids to pair replies with members
            safe.append(msg)
        parsed = as_parsed(safe)
        wants = [expect(m) for m in parsed]
        if not parsed or len(parsed) > 100:
            reply = wire.exchange(json.dumps(safe))
            assert reply["id"] is None and reply["error"]["message"] == "invalid_request"
            if parsed:
                assert reply["error"]["data"]["limit"] == 100
            return
        if all(w is None for w in wants):
            wire.exchange_silent(json.dumps(safe))
            return
        reply = wire.exchange(json.dumps(safe))
        assert isinstance(reply, list), reply
        answered = [(m, w) for m, w in zip(parsed, wants, strict=True) if w is not None]
        assert len(reply) == len(answered), (reply, safe)
        by_id = {r["id"]: r for r in reply if r["id"] is not None}
        nulls = [r for r in reply if r["id"] is None]
        for m, w in answered:
            rid = m.get("id") if type(m) is dict else None
            if type(rid) is int and w != "invalid_request":
                check_reply(by_id[rid], m, w)
        for r in nulls:  # id null: an invalid id, or a valid request with id null
            assert "result" in r or r["error"]["message"] != "internal_error", r

    run()


def test_deep_nesting(wire):
    """Arrays and objects nested up to 10,000 deep: parse_error or a plain error."""

    @examples(0.03)
    @given(st.integers(1, 10_000), st.sampled_from(["array", "object", "params"]))
    @on_fresh_connection_after_failure(wire)
    def run(depth: int, shape: str) -> None:
        if shape == "array":
            frame = "[" * depth + "]" * depth
        elif shape == "object":
            frame = '{"a":' * depth + "1" + "}" * depth
        else:
            frame = ('{"jsonrpc":"2.0","id":1,"method":"prompt.submit","params":'
                     + '{"text":' * depth + '"x"' + "}" * depth + "}")
        reply = wire.exchange(frame)
        messages = [r["error"]["message"] for r in (reply if isinstance(reply, list)
                                                    else [reply])]
        nesting = depth + (1 if shape == "params" else 0)
        if nesting > 1024:  # deeper than the JSON parser goes
            assert messages == ["parse_error"]
        elif shape == "params":
            assert messages == ["invalid_params"]
        else:  # an object that is no request, or a batch whose member is no request
            assert messages == ["invalid_request"]

    run()


def test_huge_strings_near_the_frame_limit(wire):
    """Strings that bring the frame just under or just over the 4 MiB limit: under is
    invalid_params (without echoing the input), over is a clean 1009 close."""

    @examples(0.02)
    @given(st.integers(-2048, 2048), st.sampled_from(["text", "id", "method", "key"]))
    @on_fresh_connection_after_failure(wire)
    def run(delta: int, where: str) -> None:
        target = FRAME_LIMIT + delta
        head = {"text": ('{"jsonrpc":"2.0","id":1,"method":"prompt.submit","params":'
                         f'{{"session_id":"{NEVER_FAKE}","input_id":"i","text":"', '"}}'),
                "id": ('{"jsonrpc":"2.0","method":"ping","id":"', '"}'),
                "method": ('{"jsonrpc":"2.0","id":1,"method":"', '"}'),
                "key": ('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"', '":1}}')}[where]
        fill = target - len(head[0]) - len(head[1])
        frame = head[0] + "z" * fill + head[1]
        assert len(frame.encode()) == target
        reply = wire.exchange(frame)
        if target > FRAME_LIMIT:
            assert reply == ("closed", 1009)
            return
        assert isinstance(reply, dict), reply
        if where == "id":
            # a 4 MiB id is still a valid id (and is echoed); ping's params are fine
            assert reply.get("result") == {"pong": True}
            return
        assert len(json.dumps(reply)) < 10_000, "an error must not echo a huge input"
        want = {"text": "invalid_params", "method": "method_not_found",
                "key": "invalid_params"}[where]
        assert reply["error"]["message"] == want, reply["error"]

    run()


def test_invalid_utf8_text_frames_close_with_1007(wire):
    @examples(0.03)
    @given(st.binary(max_size=50), st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80",
                                                    b"\xf8\x88\x80\x80\x80", b"\xe2\x82"]))
    def run(prefix: bytes, bad: bytes) -> None:
        frame = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"' + prefix.replace(
            b'"', b"") + bad + b'"}}'
        reply = wire.exchange(frame, text=True)
        assert reply == ("closed", 1007)

    run()
