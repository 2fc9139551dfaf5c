"""The package's public surface, its import boundary, and docs/protocol.md kept in step."""

import ast
import pathlib
import subprocess
import sys

import orjson

import tether.rpc as rpc
from tether.rpc import ERRORS, EVENT_TYPES, METHODS

RPC_DIR = pathlib.Path(rpc.__file__).parent
DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def test_public_names_are_pinned():
    assert sorted(rpc.__all__) == sorted(
        """
        ERRORS AdmissionConflict Forbidden InternalError InvalidParams InvalidRequest MethodNotFound
        NotFound Overloaded ParseError RpcError RuntimeDraining StorageUnavailable
        UnknownExecution EVENT_TYPES MAX_ATTACHMENTS MAX_ID_CHARS MAX_TEXT_CHARS
        TURN_OPTION_FIELDS Attachment Event EventsSinceResult InterruptResult Model OkResult
        PendingAdmission PingParams PingResult PromptCancelParams PromptReceiptParams
        PromptResolveUnknownParams PromptSubmitParams Receipt RuntimeDescribeParams
        RuntimeDescribeResult RuntimeShutdownParams SessionCreateParams SessionDetachParams
        SessionEventsSinceParams SessionInfo SessionInterruptParams SessionListParams
        SessionListResult SessionResumeParams SessionSummary ShutdownResult Snapshot
        TokenCreateParams TokenCreateResult TranscriptMessage TurnDefaults TurnOptions
        TurnResult
        METHODS Method decode_reply encode_error encode_event
        encode_notification encode_request encode_result MAX_BATCH MAX_FIELD_ERRORS
        Dispatcher Handler protocol_schema
        EVENT_METHOD JSONRPC_VERSION MAX_SEQ PROTOCOL SUBPROTOCOL TOKEN_PREFIX
        GAP_CLIENT_QUEUE_OVERFLOW GAP_VIEWER_QUEUE_OVERFLOW REPLAY_GAP event_envelope replay_gap
        EXIT_OWNER_RUNNING HOME_ENV HomeLayout resolve_home
        """.split()
    )
    for name in rpc.__all__:
        assert hasattr(rpc, name), name


def test_rpc_imports_only_stdlib_pydantic_orjson_and_platformdirs():
    # platformdirs: home.resolve_home's default, imported only when it is needed
    allowed = set(sys.stdlib_module_names) | {"pydantic", "orjson", "platformdirs"}
    for path in RPC_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), f"{path.name} needs a module docstring"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: must stay inside rpc
                    assert node.level == 1, f"{path.name} reaches outside rpc"
                    continue
                roots = [node.module.split(".")[0]]
            else:
                continue
            for root in roots:
                assert root in allowed, f"{path.name} imports {root}"


def test_protocol_doc_mentions_every_method_error_and_event():
    text = DOC.read_text()
    for name in METHODS:
        assert f"`{name}`" in text, name
    for reason, cls in ERRORS.items():
        assert f"`{reason}`" in text and str(cls.code) in text, reason
    for event in EVENT_TYPES:
        assert f"`{event}`" in text, event


def _blocks(lang):
    text = DOC.read_text()
    return [b.split("```")[0] for b in text.split(f"```{lang}\n")[1:]]


def test_protocol_doc_examples_validate_against_the_models():
    from tether.rpc import Event, RpcError

    [exchange] = _blocks("jsonl")
    lines = [orjson.loads(line) for line in exchange.strip().splitlines()]
    assert len(lines) == 12
    methods_by_id = {}
    for msg in lines:
        assert msg["jsonrpc"] == "2.0"
        if msg.get("method") == "event":
            event = Event.model_validate(msg["params"])
            assert event.type in EVENT_TYPES
        elif "method" in msg:
            methods_by_id[msg["id"]] = METHODS[msg["method"]]
            METHODS[msg["method"]].params.model_validate(msg["params"])
        else:
            methods_by_id[msg["id"]].result.model_validate(msg["result"])
    for block in _blocks("json"):
        msg = orjson.loads(block)
        if "error" in msg:
            err = RpcError.from_wire(msg["error"])
            assert type(err) is ERRORS[msg["error"]["message"]]
            assert err.to_wire() == msg["error"]
        else:
            Event.model_validate(msg["params"])


# What a client shares with the owner must load without pydantic: the CLI's start-up
# would double with it (tests/clients/library/test_client.py checks what the CLI imports).
PYDANTIC_FREE = ("protocol", "errors", "framing", "envelope", "home")


def test_the_shared_core_imports_without_pydantic():
    names = ", ".join(f"tether.rpc.{m}" for m in PYDANTIC_FREE)
    code = (
        f"import sys, {names}\n"
        "from tether.rpc import (PROTOCOL, EVENT_METHOD, RpcError, NotFound, encode_request,\n"
        "    decode_reply, encode_event, event_envelope, replay_gap, HomeLayout, resolve_home)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic'\n"
        "             or m in ('tether.rpc.models', 'tether.rpc.methods')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out
