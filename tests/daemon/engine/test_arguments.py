"""A tool's argument model is what the model is offered and what a call is checked
against: the schema has the shape chat APIs take, and a bad call is refused with
the argument named, before anything runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tether.daemon.approvals.policy import Verdict
from tether.daemon.config.core import ToolsConfig
from tether.daemon.delegation.tasks import TOOL_PARAMETERS
from tether.daemon.engine.arguments import BadArguments
from tether.daemon.engine.tools import ToolContext
from tether.daemon.toolsets.files import file_tools
from tether.daemon.toolsets.terminal import (
    PROCESS,
    PROCESS_PARAMETERS,
    TERMINAL,
    TERMINAL_PARAMETERS,
)

SCHEMAS = {**{t.name: t.parameters for t in file_tools(ToolsConfig())},
           "terminal": TERMINAL_PARAMETERS, "process": PROCESS_PARAMETERS,
           "delegate_task": TOOL_PARAMETERS}

#: the arguments and required lists the model has always been offered
OFFERED = {
    "read_file": ({"path", "offset", "limit"}, ["path"]),
    "write_file": ({"path", "content"}, ["path", "content"]),
    "edit_file": ({"path", "old", "new", "replace_all"}, ["path", "old", "new"]),
    "search_files": ({"pattern", "path", "glob"}, ["pattern"]),
    "list_dir": ({"path"}, []),
    "terminal": ({"command", "workdir", "timeout_s", "background", "notify_on_complete",
                  "escalate", "reason"}, ["command"]),
    "process": ({"action", "id", "offset", "limit", "timeout_s", "data", "eof"}, ["action"]),
    "delegate_task": ({"goal", "context", "toolsets", "tasks"}, []),
}


def _nodes(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, list):
        return [n for item in node for n in _nodes(item)]
    if not isinstance(node, dict):
        return []
    inner = node.get("properties", {}).values() if "properties" in node else []
    return [node, *(n for v in [*inner, node.get("items")] for n in _nodes(v))]


@pytest.mark.parametrize("name", sorted(OFFERED))
def test_each_schema_offers_the_same_arguments_in_the_shape_chat_apis_take(name):
    schema = SCHEMAS[name]
    names, required = OFFERED[name]
    assert schema["type"] == "object" and set(schema["properties"]) == names
    assert schema.get("required", []) == required
    assert schema["additionalProperties"] is False
    for node in _nodes(schema):
        assert not {"title", "$ref", "$defs", "anyOf", "default"} & set(node), (name, node)
        assert "type" in node or "enum" in node, (name, node)


def test_types_enums_and_descriptions_are_kept():
    assert SCHEMAS["process"]["properties"]["action"]["enum"] == [
        "list", "poll", "log", "wait", "kill", "write"]
    assert SCHEMAS["terminal"]["properties"]["timeout_s"]["type"] == "number"
    assert SCHEMAS["terminal"]["properties"]["escalate"]["description"].startswith(
        "run it OUTSIDE the sandbox")
    task = SCHEMAS["delegate_task"]["properties"]["tasks"]
    assert task["minItems"] == 1 and task["items"]["required"] == ["goal"]
    assert task["items"]["additionalProperties"] is False
    assert task["items"]["properties"]["toolsets"] == {
        "type": "array", "items": {"type": "string"},
        "description": "Toolsets the helper may use (at most yours)."}


@pytest.mark.parametrize("args, says", [
    ({"command": "  "}, "`command` must be a non-empty string"),
    ({"command": "ls", "timeout_s": "5"}, "`timeout_s` must be a number"),
    ({"command": "ls", "timeout_s": 0}, "`timeout_s` must be more than 0"),
    ({"command": "ls", "background": "yes"}, "`background` must be true or false"),
    ({"command": "ls", "notify_on_complete": True}, "notify_on_complete needs background"),
    ({"command": "ls", "escalate": True}, "escalate: true needs a reason"),
    ({"command": "ls", "cwd": "/"}, "`cwd` is not an argument here (known: command, workdir"),
    ({}, "`command` is required"),
])
def test_a_bad_terminal_call_names_the_argument(args, says):
    with pytest.raises(BadArguments) as caught:
        TERMINAL.parse(args)
    assert says in str(caught.value)


def test_process_arguments():
    assert PROCESS.parse({"action": "list"}).id is None
    assert PROCESS.parse({"action": "wait", "id": "p1"}).timeout_s == 30
    for args, says in (({"action": "stop", "id": "p"}, "`action` must be one of list, poll"),
                       ({"action": "poll"}, "`id` is required for action poll"),
                       ({"action": "log", "id": "p", "offset": -1}, "`offset` must be at least 0")):
        with pytest.raises(BadArguments, match=says):
            PROCESS.parse(args)


async def test_a_bad_file_tool_call_is_a_tool_error_and_touches_nothing(tmp_path):
    tools = {t.name: t for t in file_tools(ToolsConfig(), home=str(tmp_path / "home"))}
    asked: list[str] = []

    async def approve(tool: str, kind: str, subject: str, **_: Any) -> Verdict:
        asked.append(subject)
        return Verdict(True, "answered")

    async def emit(kind: str, payload: dict[str, Any]) -> None:
        pass

    ctx = ToolContext(session_id="s", admission_id=None, call_id="c", depth=0,
                      settings=None, late_delivery=False, emit=emit,  # type: ignore[arg-type]
                      cwd=str(tmp_path), attended=True, approve=approve)

    async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
        return json.loads(await tools[name].run(args, ctx))

    out = await call("read_file", {"path": "x", "offset": 0})
    assert out["error"] == "read_file: `offset` must be at least 1"
    out = await call("write_file", {"path": "new.txt", "content": 5, "mode": "w"})
    assert out["error"].startswith("write_file: `content` must be a string; `mode` is not an")
    out = await call("edit_file", {"path": "new.txt", "old": "", "new": "x"})
    assert "`old` must not be empty" in out["error"]
    assert not (tmp_path / "new.txt").exists() and asked == []
