"""The dispatcher as a peer sees it: frames in, exact JSON-RPC 2.0 replies out."""

import asyncio
import logging
import re

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.rpc import (
    MAX_BATCH,
    METHODS,
    Dispatcher,
    NotFound,
    OkResult,
    PingResult,
    Receipt,
)


class Ctx:
    def __init__(self):
        self.calls = []


def build(**kwargs):
    d = Dispatcher(**kwargs)

    @d.register("ping")
    async def ping(params, ctx):
        ctx.calls.append("ping")
        return PingResult(pong=True)

    @d.register("session.detach")
    async def detach(params, ctx):
        ctx.calls.append(("detach", params.session_id))
        if params.session_id == "missing":
            raise NotFound(f"no session {params.session_id}", session_id=params.session_id)
        return OkResult(ok=True)

    @d.register("prompt.submit")
    async def submit(params, ctx):
        ctx.calls.append(("submit", params.input_id, params.finite))
        return Receipt(
            admission_id="a-" + params.input_id,
            session_id=params.session_id,
            input_id=params.input_id,
            status="queued",
        )

    @d.register("runtime.describe")
    async def describe(params, ctx):
        ctx.calls.append("describe")
        raise RuntimeError("secret-internal-state /etc/passwd")

    @d.register("session.list")
    async def session_list(params, ctx):
        # plain dicts pass through untouched
        return {"sessions": [], "next_cursor": None}

    return d


@pytest.fixture
def d():
    return build()


@pytest.fixture
def ctx():
    return Ctx()


async def call(d, ctx, obj):
    frame = obj if isinstance(obj, bytes | str) else orjson.dumps(obj)
    reply = await d.handle(frame, ctx)
    return None if reply is None else orjson.loads(reply)


def req(method, params=None, id=1):
    msg = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def error_of(reply):
    assert set(reply) == {"jsonrpc", "id", "error"}
    assert reply["jsonrpc"] == "2.0"
    err = reply["error"]
    assert err["message"] == err["data"]["reason"]
    return err


async def test_ping_round_trip(d, ctx):
    assert await d.handle(b'{"jsonrpc":"2.0","id":1,"method":"ping"}', ctx) == (
        b'{"jsonrpc":"2.0","id":1,"result":{"pong":true}}'
    )
    assert await call(d, ctx, req("ping", {}, id="abc")) == {
        "jsonrpc": "2.0",
        "id": "abc",
        "result": {"pong": True},
    }
    assert ctx.calls == ["ping", "ping"]


async def test_str_frames_are_accepted(d, ctx):
    assert (await call(d, ctx, '{"jsonrpc":"2.0","id":2,"method":"ping"}'))["result"] == {
        "pong": True
    }


async def test_null_id_is_a_request_and_gets_a_reply(d, ctx):
    assert await call(d, ctx, req("ping", id=None)) == {
        "jsonrpc": "2.0",
        "id": None,
        "result": {"pong": True},
    }


async def test_dict_results_pass_through(d, ctx):
    assert (await call(d, ctx, req("session.list")))["result"] == {
        "sessions": [],
        "next_cursor": None,
    }


async def test_model_results_are_serialised_in_json_mode(d, ctx):
    reply = await call(
        d, ctx, req("prompt.submit", {"session_id": "s", "input_id": "i", "text": "hi"})
    )
    assert reply["result"] == {
        "admission_id": "a-i",
        "session_id": "s",
        "input_id": "i",
        "status": "queued",
        "outcome": None,
        "result": None,
        "paused_by": None,
    }


@pytest.mark.parametrize(
    "frame", [b"", b"{", b"not json", b'{"jsonrpc":"2.0",}', b"\xff\xfe", "\ud800"]
)
async def test_parse_error(d, ctx, frame):
    reply = await call(d, ctx, frame)
    assert reply["id"] is None
    err = error_of(reply)
    assert (err["code"], err["message"]) == (-32700, "parse_error")


@pytest.mark.parametrize(
    ("msg", "echo_id", "fragment"),
    [
        (1, None, "request object"),
        ("ping", None, "request object"),
        (None, None, "request object"),
        ({"id": 1, "method": "ping"}, 1, "jsonrpc"),
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, 1, "jsonrpc"),
        ({"jsonrpc": 2.0, "id": 1, "method": "ping"}, 1, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": 1}, 1, "method"),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, 1, "method"),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None, "id"),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None, "id"),
        ({"jsonrpc": "2.0", "id": [1], "method": "ping"}, None, "id"),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, None, "id"),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"}, 1, "params"),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": None}, 1, "params"),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": 3}, 1, "params"),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "param": {}}, 1, "param"),
        # no id, but invalid: still answered, with id null (the spec's own example)
        ({"jsonrpc": "2.0", "method": 1, "params": "bar"}, None, "method"),
    ],
)
async def test_invalid_request(d, ctx, msg, echo_id, fragment):
    reply = await call(d, ctx, orjson.dumps(msg))
    assert reply["id"] == echo_id
    err = error_of(reply)
    assert (err["code"], err["message"]) == (-32600, "invalid_request")
    assert fragment in err["data"]["detail"]
    assert ctx.calls == []


async def test_method_not_found(d, ctx):
    err = error_of(await call(d, ctx, req("session.explode")))
    assert (err["code"], err["message"]) == (-32601, "method_not_found")
    assert err["data"]["method"] == "session.explode"
    # in the table but not served by this dispatcher
    err = error_of(await call(d, ctx, req("token.create")))
    assert err["code"] == -32601 and "not served" in err["data"]["detail"]


async def test_method_not_found_does_not_echo_huge_names(d, ctx):
    err = error_of(await call(d, ctx, req("x" * 100_000)))
    assert len(err["data"]["method"]) == 100


async def test_invalid_params_lists_the_fields(d, ctx):
    reply = await call(
        d,
        ctx,
        req(
            "prompt.submit",
            {"session_id": "s", "input_id": "i", "text": "hi", "finite": "true"},
            id=9,
        ),
    )
    assert reply["id"] == 9
    err = error_of(reply)
    assert (err["code"], err["message"]) == (-32602, "invalid_params")
    assert err["data"]["fields"] == [
        {"loc": "finite", "msg": "Input should be a valid boolean", "type": "bool_type"}
    ]
    assert err["data"]["detail"] == "finite: Input should be a valid boolean"
    assert ctx.calls == []


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"session_id": "s", "input_id": "i", "text": 1}, {("text", "string_type")}),
        (
            {"session_id": "s", "input_id": "i", "text": "t", "bogus": 1},
            {("bogus", "extra_forbidden")},
        ),
        ({"session_id": "s", "text": "t"}, {("input_id", "missing")}),
        ({}, {("session_id", "missing"), ("input_id", "missing"), ("text", "missing")}),
        (
            {"session_id": "s", "input_id": "i", "text": "t", "attachments": [{"name": "a"}]},
            {("attachments.0.content", "missing")},
        ),
    ],
)
async def test_invalid_params_variants(d, ctx, params, expected):
    err = error_of(await call(d, ctx, req("prompt.submit", params)))
    assert err["code"] == -32602
    assert {(f["loc"], f["type"]) for f in err["data"]["fields"]} == expected


async def test_omitted_params_are_an_empty_object(d, ctx):
    err = error_of(await call(d, ctx, req("prompt.submit")))
    assert err["code"] == -32602
    assert {f["loc"] for f in err["data"]["fields"]} == {"session_id", "input_id", "text"}


async def test_root_validator_errors_have_an_empty_loc():
    d = Dispatcher()

    @d.register("prompt.receipt")
    async def receipt(params, ctx):
        raise AssertionError("not reached")

    err = error_of(await call(d, Ctx(), req("prompt.receipt", {"session_id": "s"})))
    assert err["code"] == -32602
    assert err["data"]["fields"][0]["loc"] == ""
    assert "exactly one of admission_id or input_id" in err["data"]["detail"]


async def test_array_params_are_invalid_params(d, ctx):
    err = error_of(await call(d, ctx, req("ping", ["x"])))
    assert (err["code"], err["message"]) == (-32602, "invalid_params")
    assert ctx.calls == []


async def test_invalid_params_field_list_is_bounded(d, ctx):
    params = {f"k{i}": i for i in range(500)}
    err = error_of(await call(d, ctx, req("ping", params)))
    assert len(err["data"]["fields"]) == 20
    assert err["data"]["detail"].endswith("and 480 more")


async def test_invalid_params_never_echo_the_input(d, ctx):
    text = "SECRET" * 10
    err = error_of(
        await call(
            d,
            ctx,
            req(
                "prompt.submit", {"session_id": "s", "input_id": "i", "text": text, "finite": text}
            ),
        )
    )
    assert "SECRET" not in orjson.dumps(err).decode()


async def test_handler_rpc_error_goes_to_the_wire(d, ctx):
    reply = await call(d, ctx, req("session.detach", {"session_id": "missing"}, id="r1"))
    assert reply["id"] == "r1"
    assert reply["error"] == {
        "code": -32004,
        "message": "not_found",
        "data": {"reason": "not_found", "detail": "no session missing", "session_id": "missing"},
    }


async def test_internal_error_has_an_error_id_and_no_traceback(d, ctx, caplog):
    with caplog.at_level(logging.ERROR, logger="tether.rpc"):
        reply = await call(d, ctx, req("runtime.describe", id=5))
    err = error_of(reply)
    assert (err["code"], err["message"]) == (-32603, "internal_error")
    error_id = err["data"]["error_id"]
    assert re.fullmatch(r"[0-9a-f]{8}", error_id)
    wire = orjson.dumps(reply).decode()
    assert "secret-internal-state" not in wire
    assert "Traceback" not in wire and "RuntimeError" not in wire
    # the log has both the id and the traceback
    [record] = [r for r in caplog.records if r.name == "tether.rpc"]
    assert error_id in record.getMessage()
    assert record.exc_info is not None and "secret-internal-state" in caplog.text


async def test_error_ids_differ_between_failures(d, ctx, caplog):
    with caplog.at_level(logging.CRITICAL, logger="tether.rpc"):
        a = error_of(await call(d, ctx, req("runtime.describe")))
        b = error_of(await call(d, ctx, req("runtime.describe")))
    assert a["data"]["error_id"] != b["data"]["error_id"]


async def test_unencodable_result_is_an_internal_error(ctx, caplog):
    d = Dispatcher()

    @d.register("ping")
    async def ping(params, ctx):
        return {"pong": object()}

    with caplog.at_level(logging.CRITICAL, logger="tether.rpc"):
        err = error_of(await call(d, ctx, req("ping")))
    assert err["code"] == -32603 and "error_id" in err["data"]


async def test_notification_runs_but_gets_no_reply(d, ctx):
    assert await d.handle(orjson.dumps({"jsonrpc": "2.0", "method": "ping"}), ctx) is None
    assert ctx.calls == ["ping"]


@pytest.mark.parametrize(
    "msg",
    [
        {"jsonrpc": "2.0", "method": "nope"},
        {"jsonrpc": "2.0", "method": "session.detach", "params": {}},
        {"jsonrpc": "2.0", "method": "session.detach", "params": {"session_id": "missing"}},
        {"jsonrpc": "2.0", "method": "ping", "params": [1]},
    ],
)
async def test_failing_notifications_get_no_reply(d, ctx, msg):
    assert await d.handle(orjson.dumps(msg), ctx) is None


async def test_failing_notification_still_logs_internal_errors(d, ctx, caplog):
    with caplog.at_level(logging.ERROR, logger="tether.rpc"):
        assert await d.handle(b'{"jsonrpc":"2.0","method":"runtime.describe"}', ctx) is None
    assert ctx.calls == ["describe"]
    assert "internal error" in caplog.text


async def test_mixed_batch(d, ctx, caplog):
    batch = [
        req("ping", id=1),
        {"jsonrpc": "2.0", "method": "ping"},  # notification: no reply member
        req("session.detach", {"session_id": "missing"}, id=2),
        req("nope", id=3),
        1,
        req("prompt.submit", {"session_id": "s"}, id=4),
        req("session.detach", {"session_id": "s1"}, id="five"),
    ]
    replies = await call(d, ctx, batch)
    assert [r["id"] for r in replies] == [1, 2, 3, None, 4, "five"]
    assert replies[0]["result"] == {"pong": True}
    assert [r["error"]["code"] for r in replies[1:5]] == [-32004, -32601, -32600, -32602]
    assert replies[5]["result"] == {"ok": True}
    assert ctx.calls.count("ping") == 2


async def test_batch_members_run_concurrently(ctx):
    d = Dispatcher()
    both_in = asyncio.Event()
    arrived = 0

    @d.register("ping")
    async def ping(params, ctx):
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            both_in.set()
        await asyncio.wait_for(both_in.wait(), 1)
        return {"pong": True}

    replies = await call(d, ctx, [req("ping", id=1), req("ping", id=2)])
    assert [r["result"] for r in replies] == [{"pong": True}] * 2


async def test_empty_batch_is_a_single_invalid_request(d, ctx):
    reply = await call(d, ctx, [])
    assert isinstance(reply, dict)
    assert reply["id"] is None and error_of(reply)["code"] == -32600


async def test_batch_of_invalid_members(d, ctx):
    replies = await call(d, ctx, [1, 2, 3])
    assert [error_of(r)["code"] for r in replies] == [-32600] * 3
    assert [r["id"] for r in replies] == [None] * 3


async def test_all_notification_batch_has_no_reply(d, ctx):
    batch = [{"jsonrpc": "2.0", "method": "ping"}, {"jsonrpc": "2.0", "method": "nope"}]
    assert await d.handle(orjson.dumps(batch), ctx) is None
    assert ctx.calls == ["ping"]


async def test_oversize_batch_is_refused_whole(d, ctx):
    reply = await call(d, ctx, [req("ping", id=i) for i in range(MAX_BATCH + 1)])
    err = error_of(reply)
    assert err["code"] == -32600 and err["data"]["limit"] == MAX_BATCH
    assert ctx.calls == []
    full = await call(d, ctx, [req("ping", id=i) for i in range(MAX_BATCH)])
    assert len(full) == MAX_BATCH


async def test_batch_limit_is_a_keyword(ctx):
    d = build(max_batch=2)
    assert error_of(await call(d, ctx, [req("ping", id=i) for i in range(3)]))["data"]["limit"] == 2


async def test_nested_batch_member_is_invalid(d, ctx):
    [reply] = await call(d, ctx, [[req("ping")]])
    assert error_of(reply)["code"] == -32600


def test_register_refuses_unknown_and_duplicate_names():
    d = Dispatcher()
    with pytest.raises(ValueError, match="not in the method table"):
        d.register("session.explode")

    @d.register("ping")
    async def ping(params, ctx):
        return {"pong": True}

    with pytest.raises(ValueError, match="already has a handler"):
        d.register("ping")

    first = d.register("session.detach")
    second = d.register("session.detach")

    async def h(params, ctx):
        return {"ok": True}

    first(h)
    with pytest.raises(ValueError, match="already has a handler"):
        second(h)


def test_register_returns_the_handler_and_tracks_unhandled():
    d = Dispatcher()

    async def ping(params, ctx):
        return {"pong": True}

    assert d.register("ping")(ping) is ping
    assert set(d.unhandled()) == set(METHODS) - {"ping"}


async def test_check_results_catches_a_wrong_result(ctx, caplog):
    d = Dispatcher(check_results=True)

    @d.register("ping")
    async def ping(params, ctx):
        return {"pong": "yes"}

    @d.register("session.detach")
    async def detach(params, ctx):
        return PingResult(pong=True)

    @d.register("session.list")
    async def session_list(params, ctx):
        return {"sessions": [], "next_cursor": None}

    with caplog.at_level(logging.CRITICAL, logger="tether.rpc"):
        assert error_of(await call(d, ctx, req("ping")))["code"] == -32603
        assert (
            error_of(await call(d, ctx, req("session.detach", {"session_id": "s"})))["code"]
            == -32603
        )
    assert (await call(d, ctx, req("session.list")))["result"]["sessions"] == []


async def test_cancellation_propagates_instead_of_replying(ctx):
    d = Dispatcher()

    @d.register("ping")
    async def ping(params, ctx):
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await d.handle(orjson.dumps(req("ping")), ctx)


async def test_ctx_reaches_the_handler_untouched():
    d = Dispatcher()
    seen = []

    @d.register("ping")
    async def ping(params, ctx):
        seen.append(ctx)
        return {"pong": True}

    marker = object()
    await d.handle(orjson.dumps(req("ping")), marker)
    assert seen == [marker]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
request_like = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
        "id": st.one_of(st.integers(0, 10), st.text(max_size=4), st.none(), st.booleans()),
        "method": st.one_of(st.sampled_from(sorted(METHODS) + ["nope"]), st.integers(-5, 5)),
        "params": json_values,
    },
)


@settings(max_examples=300, deadline=None, database=None)  # no .hypothesis dir in the repo
@given(
    st.one_of(st.binary(max_size=64), json_values, request_like, st.lists(request_like, max_size=4))
)
def test_any_frame_gets_a_well_formed_answer_or_none(frame):
    d = build()
    raw = frame if isinstance(frame, bytes) else orjson.dumps(frame)

    async def run():
        logging.getLogger("tether.rpc").disabled = True
        try:
            return await d.handle(raw, Ctx())
        finally:
            logging.getLogger("tether.rpc").disabled = False

    reply = asyncio.run(run())
    if reply is None:
        return
    parsed = orjson.loads(reply)
    for r in parsed if isinstance(parsed, list) else [parsed]:
        assert r["jsonrpc"] == "2.0" and "id" in r
        assert ("result" in r) != ("error" in r)
        if "error" in r:
            assert r["error"]["message"] == r["error"]["data"]["reason"]


async def test_unknown_members_are_echoed_bounded(d, ctx):
    msg = {**req("ping"), **{("k" * 500) + str(i): i for i in range(50)}}
    err = error_of(await call(d, ctx, msg))
    assert err["code"] == -32600
    assert len(err["data"]["detail"]) < 1000


async def test_refine_replaces_a_validation_error_only_when_it_answers(ctx):
    from tether.rpc import InvalidParams

    d = Dispatcher()
    seen = []

    def refine(params):
        seen.append(params)
        if len(params.get("text", "")) > 10:
            return InvalidParams("text is too long for this owner", fields=[])
        return None

    @d.register("prompt.submit", refine=refine)
    async def submit(params, ctx):
        raise AssertionError("invalid params never reach the handler")

    long = error_of(await call(d, ctx, req("prompt.submit", {"text": "x" * 11})))
    assert long["data"]["detail"] == "text is too long for this owner"
    short = error_of(await call(d, ctx, req("prompt.submit", {"text": "x"})))
    assert short["message"] == "invalid_params" and "session_id" in short["data"]["detail"]
    assert seen == [{"text": "x" * 11}, {"text": "x"}]


async def test_a_guard_refuses_before_anything_runs_or_is_validated(ctx):
    from tether.rpc import Forbidden

    seen = []

    def guard(method, c):
        seen.append(method)
        return Forbidden("not for you", method=method) if method == "prompt.submit" else None

    d = build(guard=guard)
    # refused even with params that would not validate, and the handler never runs
    err = error_of(await call(d, ctx, req("prompt.submit", {"bogus": 1})))
    assert (err["code"], err["message"], err["data"]["method"]) == (-32003, "forbidden",
                                                                     "prompt.submit")
    batch = await call(d, ctx, [req("ping", id=1), req("prompt.submit", {}, id=2),
                                {"jsonrpc": "2.0", "method": "prompt.submit"}])
    assert [r.get("result") or r["error"]["message"] for r in batch] == [{"pong": True},
                                                                         "forbidden"]
    assert ctx.calls == ["ping"]
    # unknown methods are not the guard's business
    assert error_of(await call(d, ctx, req("no.such")))["message"] == "method_not_found"
    assert "no.such" not in seen


@pytest.mark.parametrize(("params", "where"), [
    ({"session_id": "s", "input_id": "i\u0000", "text": "hi"}, "input_id"),
    ({"session_id": "s", "input_id": "i", "text": "hi",
      "attachments": [{"name": "a", "content": "x\u0000y"}]}, "attachments.0.content"),
    ({"session_id": "s", "input_id": "i", "text": "hi", "k\u0000": 1}, "k\u0000"),
])
async def test_nul_in_any_string_is_refused_before_the_handler(d, ctx, params, where):
    reply = await call(d, ctx, req("prompt.submit", params))
    err = error_of(reply)
    assert err["code"] == -32602 and "NUL" in err["data"]["detail"]
    assert err["data"]["fields"] == [{"loc": where, "msg": "contains NUL (U+0000)",
                                      "type": "string_nul"}]
    assert ctx.calls == []
    # the same params without it reach the handler
    clean = orjson.loads(orjson.dumps(params).replace(b"\\u0000", b""))
    clean.pop("k", None)
    assert "result" in await call(d, ctx, req("prompt.submit", clean))
    assert ctx.calls == [("submit", "i", False)]


@pytest.mark.parametrize("as_text", [True, False])
async def test_an_escaped_backslash_before_u0000_is_text_and_a_nul_beside_it_is_not(
        d, ctx, as_text):
    # JSON text carries NUL only as the escape \u0000; the six characters \u0000 after an
    # escaped backslash are text, on a text frame and on bytes alike
    six = {"session_id": "s", "input_id": "i", "text": "a\\u0000b"}
    frame = orjson.dumps(req("prompt.submit", six))
    assert b"\\\\u0000" in frame
    assert "result" in await call(d, ctx, frame.decode() if as_text else frame)
    assert ctx.calls == [("submit", "i", False)]
    both = {**six, "input_id": "j\u0000"}
    frame = orjson.dumps(req("prompt.submit", both))
    err = error_of(await call(d, ctx, frame.decode() if as_text else frame))
    assert err["data"]["fields"][0]["loc"] == "input_id"
    assert ctx.calls == [("submit", "i", False)]


async def test_params_nested_to_the_parser_s_limit_are_answered_under_a_deep_stack(d, ctx):
    """The owner reads a frame several hundred calls down (websockets, tasks): params
    nested 1,020 deep (the parser stops at 1,024) must still be walked and answered."""
    depth = 1020
    nested = '{"text":' * depth + '"x\\u0000"' + "}" * depth
    frame = ('{"jsonrpc":"2.0","id":7,"method":"prompt.submit","params":' + nested + "}")

    async def under(levels: int, frame: str) -> dict:
        return await under(levels - 1, frame) if levels else await call(d, ctx, frame)

    err = error_of(await under(150, frame))
    assert err["code"] == -32602 and err["data"]["fields"][0]["type"] == "string_nul"
    assert err["data"]["fields"][0]["loc"] == ".".join(["text"] * depth)
    plain = frame.replace("\\u0000", "")  # no NUL: the params model refuses it instead
    assert error_of(await under(150, plain))["message"] == "invalid_params"
    assert ctx.calls == []


async def test_a_failure_before_the_handler_is_answered_not_dropped(ctx, caplog):
    def guard(name, ctx):
        raise RuntimeError("guard broke")

    d = build(guard=guard)
    with caplog.at_level(logging.CRITICAL, logger="tether.rpc"):
        err = error_of(await call(d, ctx, req("ping", id=3)))
        batch = await call(d, ctx, [req("ping", id=4), {"jsonrpc": "2.0", "method": "ping"}])
        quiet = await call(d, ctx, {"jsonrpc": "2.0", "method": "ping"})
    assert (err["code"], err["message"]) == (-32603, "internal_error")
    assert [r["id"] for r in batch] == [4] and batch[0]["error"]["message"] == "internal_error"
    assert quiet is None  # a notification is never answered
    assert ctx.calls == []
