"""delegate_task's pure parts: argument parsing, child toolsets, child settings, recovery."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from tether.daemon.config.core import Config, DelegationConfig
from tether.daemon.config.turn import TurnSettings, resolve_child
from tether.daemon.delegation.tasks import TaskSpec, child_toolsets, parse_tasks
from tether.store.tables import admissions, delegations, sessions

# -- parse_tasks -------------------------------------------------------------------


def test_single_goal_is_one_task():
    assert parse_tasks({"goal": "find the bug"}, 8) == [TaskSpec("find the bug")]


def test_single_goal_keeps_context_and_toolsets():
    [task] = parse_tasks({"goal": "g", "context": "c", "toolsets": ["delegation"]}, 8)
    assert task == TaskSpec("g", "c", ("delegation",))
    assert task.as_json() == {"goal": "g", "context": "c", "toolsets": ["delegation"]}


def test_tasks_list_keeps_order():
    tasks = parse_tasks({"tasks": [{"goal": "a"}, {"goal": "b", "toolsets": []}]}, 8)
    assert tasks == [TaskSpec("a"), TaskSpec("b", None, ())]


def test_up_to_max_tasks_is_accepted_and_more_is_refused():
    assert len(parse_tasks({"tasks": [{"goal": str(i)} for i in range(3)]}, 3)) == 3
    with pytest.raises(ValueError, match="4 tasks given; at most 3"):
        parse_tasks({"tasks": [{"goal": str(i)} for i in range(4)]}, 3)


@pytest.mark.parametrize("args, message", [
    ({}, "give `goal` .* or `tasks`"),
    ({"context": "only context"}, "give `goal` .* or `tasks`"),
    ({"tasks": [{"goal": "a"}], "goal": "b"}, "either `tasks` or one task's keys.*goal"),
    ({"tasks": []}, "`tasks` must not be empty"),
    ({"tasks": {"goal": "a"}}, "`tasks` must be a list"),
    ({"tasks": ["do it"]}, r"`tasks\[0\]` must be an object"),
    ({"tasks": [{"goal": "a"}, {"context": "x"}]}, r"`tasks\[1\]\.goal` is required"),
    ({"goal": "   "}, r"`goal` must be a non-empty string"),
    ({"goal": 7}, r"`goal` must be a string"),
    ({"goal": "g", "context": ["x"]}, r"`context` must be a string"),
    ({"goal": "g", "toolsets": "delegation"}, r"`toolsets` must be a list"),
    ({"goal": "g", "toolsets": [1]}, r"`toolsets\[0\]` must be a string"),
    ({"goal": "g", "background": True},
     r"`background` is not an argument here \(known: goal, context, toolsets, tasks\)"),
    ({"tasks": [{"goal": "a", "x": 1}]}, r"`tasks\[0\]\.x` is not an argument here"),
    ("a text", "the arguments must be an object"),
])
def test_bad_shapes_say_what_is_wrong(args, message):
    with pytest.raises(ValueError, match=message):
        parse_tasks(args, 8)


# -- child toolsets ----------------------------------------------------------------


def test_a_child_gets_the_parents_toolsets_by_default():
    assert child_toolsets(None, ("delegation", "files")) == ("delegation", "files")


def test_a_child_never_gets_a_toolset_its_parent_lacks():
    assert child_toolsets(("files", "shell"), ("delegation", "files")) == ("files",)
    assert child_toolsets(("shell",), ()) == ()


def test_a_task_may_narrow_its_toolsets():
    assert child_toolsets((), ("delegation",)) == ()
    assert child_toolsets(("delegation", "delegation"), ("delegation",)) == ("delegation",)


# -- child settings ----------------------------------------------------------------

PARENT = TurnSettings(provider="custom", base_url="http://parent/v1", model="big",
                      api_key="parent-key", toolsets=("delegation",), reasoning="high",
                      max_turns=30, ignore_rules=True)


def _config(**delegation) -> Config:
    return replace(Config(), delegation=DelegationConfig(**delegation))


def test_a_child_inherits_the_parents_endpoint_and_key():
    child = resolve_child(_config(), PARENT, ())
    assert (child.provider, child.base_url, child.model, child.api_key) == (
        "custom", "http://parent/v1", "big", "parent-key")
    assert child.reasoning == "high" and child.toolsets == ()


def test_a_cheaper_child_model_on_the_same_endpoint_keeps_the_key():
    child = resolve_child(_config(model="small"), PARENT, ())
    assert (child.model, child.api_key) == ("small", "parent-key")


def test_another_endpoint_gets_its_own_key_or_none():
    other = resolve_child(_config(base_url="http://child/v1"), PARENT, ())
    assert (other.base_url, other.api_key) == ("http://child/v1", None)
    own = resolve_child(_config(base_url="http://child/v1", api_key="child-key"), PARENT, ())
    assert own.api_key == "child-key"
    openai = resolve_child(_config(provider="openai"), PARENT, ())
    assert (openai.provider, openai.base_url, openai.api_key) == ("openai", None, None)


def test_child_turns_are_capped():
    assert resolve_child(_config(child_max_turns=5), PARENT, ()).max_turns == 5
    short = replace(PARENT, max_turns=3)
    assert resolve_child(_config(child_max_turns=5), short, ()).max_turns == 3


# -- recovery ----------------------------------------------------------------------



async def test_recovery_interrupts_only_an_older_owners_rows_and_keeps_finished_children(
        wire):
    task_json = orjson.dumps({"tasks": [{"goal": "a"}, {"goal": "b"}],
                              "settings": {"model": "m"}}).decode()
    done_alpha = orjson.dumps({"results": [
        {"task_index": 0, "status": "completed", "summary": "ALPHA"}]}).decode()

    def seed(conn):
        sessions.insert(conn, session_id="ses_origin", request_id=None, params_digest=None,
                        parent_session_id=None, source="cli", title=None, cwd=None,
                        options={}, now=1.0)
        for did, epoch in (("dlg_old", 1), ("dlg_current", 2)):
            delegations.insert(conn, delegation_id=did, origin_session_id="ses_origin",
                               origin_admission_id="adm_x", task_json=task_json,
                               owner_epoch=epoch, now=1.0)
        delegations.record_progress(conn, "dlg_old", done_alpha)

    # the owner of epoch 2, which has no turn to run the delivery (the session's queue
    # is paused behind an unknown admission), so what recovery recorded stays put
    async with wire({}, epoch=2) as parts:
        await parts.db.write(seed)
        parts.scheduler.block("ses_origin", "adm_unknown")
        await parts.background.recover()
        await parts.background.recover()  # a second pass finds nothing left to deliver
        old = await parts.db.read(lambda c: delegations.get(c, "dlg_old"))
        current = await parts.db.read(lambda c: delegations.get(c, "dlg_current"))
        delivered = await parts.db.read(lambda c: admissions.open_for_session(c, "ses_origin"))
    # this owner's own delegation is still running: recovery must not touch it
    assert (current["state"], current["delivery_state"]) == ("running", "pending")
    assert (old["state"], old["delivery_state"]) == ("interrupted", "delivered")
    alpha, beta = orjson.loads(old["result_json"])["results"]
    assert (alpha["status"], alpha["summary"]) == ("completed", "ALPHA")
    assert (beta["task_index"], beta["status"]) == (1, "interrupted")
    assert [(a["principal_id"], a["target_session_id"], a["request_id"]) for a in delivered] \
        == [("delegation", "ses_origin", "dlg_old")]
