"""The plan `tether acp` shows: a delegation's tasks, from the events the owner sends
(pure; the background path end to end is in test_acp.py)."""

from __future__ import annotations

import json
from typing import Any

from tether.clients.acp.plan import DelegationPlan


def ev(kind: str, aid: str = "adm_1", **payload: Any) -> dict[str, Any]:
    return {"type": kind, "admission_id": aid, "payload": payload}


def shown(update: Any) -> list[tuple[str, str]]:
    return [(e.content, e.status) for e in update.entries]


def delegate(call: str, *goals: str) -> dict[str, Any]:
    args = json.dumps({"tasks": [{"goal": g} for g in goals]})
    return ev("tool.start", call_id=call, name="delegate_task", arguments=args)


def test_an_inline_delegation_runs_through_pending_in_progress_completed():
    plan = DelegationPlan()
    first = plan.on_event(delegate("c1", "read the logs", "read the code"))
    started = plan.on_event(ev("subagent.start", task_index=1, goal="read the code",
                               child_session_id="ses_b"))
    plan.on_event(ev("subagent.start", task_index=0, goal="read the logs",
                     child_session_id="ses_a"))
    failed = plan.on_event(ev("subagent.complete", task_index=0, child_session_id="ses_a",
                              status="failed", summary="boom"))
    plan.on_event(ev("subagent.complete", task_index=1, child_session_id="ses_b",
                     status="completed", summary="ok"))
    assert shown(first) == [("read the logs", "pending"), ("read the code", "pending")]
    assert shown(started) == [("read the logs", "pending"), ("read the code", "in_progress")]
    assert shown(failed)[0] == ("read the logs (failed)", "completed")
    # the tool's end changes nothing more: every task had ended
    assert plan.on_event(ev("tool.complete", call_id="c1", name="delegate_task",
                            result="{}")) is None
    # the next delegation replaces the finished one
    nxt = plan.on_event(delegate("c2", "write the fix"))
    assert shown(nxt) == [("write the fix", "pending")]


def test_a_task_that_never_ran_ends_with_its_delegation_and_bad_input_changes_nothing():
    plan = DelegationPlan()
    plan.on_event(delegate("c1", "one", "two"))
    ended = plan.on_event(ev("tool.complete", call_id="c1", name="delegate_task",
                             result='{"error": "x"}'))
    assert shown(ended) == [("one (not run)", "completed"), ("two (not run)", "completed")]
    assert plan.on_event(ev("tool.start", call_id="c3", name="delegate_task",
                            arguments="{not json")) is None
    assert plan.on_event(ev("subagent.start", task_index=7, goal="nobody",
                            child_session_id="ses_x")) is None
    assert plan.on_event(ev("tool.start", call_id="c4", name="terminal",
                            arguments='{"command": "ls"}')) is None


def test_a_background_delegation_keeps_its_entries_under_its_id():
    plan = DelegationPlan()
    plan.on_event(delegate("c1", "one", "two"))
    # the call recorded a background delegation: the same entries, not a second group
    assert plan.on_event(ev("delegation.dispatched", delegation_id="dlg_1",
                            tasks=[{"goal": "one"}, {"goal": "two"}])) is None
    plan.on_event(ev("tool.complete", call_id="c1", name="delegate_task",
                     result='{"status": "dispatched"}'))
    started = plan.on_event(ev("subagent.start", task_index=0, goal="one",
                               child_session_id="ses_a", delegation_id="dlg_1"))
    done = plan.on_event(ev("delegation.complete", delegation_id="dlg_1",
                            state="interrupted", admission_id=None, results=[]))
    assert shown(started) == [("one", "in_progress"), ("two", "pending")]
    assert shown(done) == [("one (interrupted)", "completed"),
                           ("two (interrupted)", "completed")]
