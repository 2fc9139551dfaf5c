"""`tether approvals`, `tether approve`, `tether deny`, and approvals in a finite chat."""

from __future__ import annotations

import asyncio

import pytest
from fakeprovider import FakeProvider
from harness import OwnerProcess, Peer, write_config
from toolscript import ScriptedModel, tool_results

from tether.clients.cli.approvals_cmd import match_pending
from tether.clients.library.exits import CliError

TOUCH = "touch made-by-agent"


def model() -> ScriptedModel:
    return ScriptedModel({
        "make": [("terminal", {"command": TOUCH})],
        "again": [("terminal", {"command": TOUCH})],
        "where": [("terminal", {"command": "pwd"})],
    })


async def test_answering_prompts_from_the_command_line(tmp_path, run_cli):
    m = model()
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"

    def cli(*args: str):
        return asyncio.to_thread(run_cli, home, *args)

    with FakeProvider(m) as provider:
        write_config(home, provider.url)
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="m",
                                      text="make a file")
                apr = (await peer.wait_event(lambda e: e["type"] == "approval.requested"))[
                    "payload"]["approval_id"]
                listed = await cli("approvals")
                unknown = await cli("approve", "apr_zzz")
                approved = await cli("approve", apr[:9], "--always")  # a prefix will do
                await peer.wait_terminal(sid, r["admission_id"])
                again = await cli("approve", apr)
                rules = await cli("approvals", "rules")
                rule_id = next(w for w in rules.stdout.split() if w.startswith("rul_"))
                removed = await cli("approvals", "rm", rule_id)
                r2 = await peer.result("prompt.submit", session_id=sid, input_id="a",
                                       text="again please")
                apr2 = (await peer.wait_event(lambda e: e["type"] == "approval.requested"
                                              and e["payload"]["approval_id"] != apr))[
                    "payload"]["approval_id"]
                # as the README writes it: without apr_, with an ellipsis
                denied = await cli("deny", apr2[4:10] + "…", "--reason", "not today")
                await peer.wait_terminal(sid, r2["admission_id"])
                empty = await cli("approvals")

    assert listed.returncode == 0 and apr in listed.stdout and TOUCH in listed.stdout
    assert sid in listed.stdout
    assert unknown.returncode == 1, unknown
    assert "no pending approval matches 'apr_zzz'" in unknown.stderr
    assert "1 pending" in unknown.stderr
    assert approved.returncode == 0, approved.stderr
    assert "approved (always)" in approved.stdout
    assert again.returncode == 1 and "no pending approval matches" in again.stderr
    assert "nothing is pending now" in again.stderr
    assert TOUCH in rules.stdout and "always" in rules.stdout
    assert removed.returncode == 0
    assert denied.returncode == 0 and "denied" in denied.stdout
    [res] = tool_results(m, "again")
    assert res["denied"] is True and "not today" in res["error"]
    assert empty.stdout.strip() == "no pending approvals"


def test_a_finite_chat_denies_and_says_so_and_runs_in_the_cli_cwd(tmp_path, run_cli):
    m = model()
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    with FakeProvider(m) as provider:
        write_config(home, provider.url)
        with OwnerProcess(home):
            made = run_cli(home, "chat", "-Q", "-q", "make a file", cwd=work)
            where = run_cli(home, "chat", "-Q", "-q", "where am I", cwd=work)
    assert made.returncode == 0, made.stderr
    assert "this chat is finite" in made.stderr and "approvals.unattended" in made.stderr
    assert not (work / "made-by-agent").exists()
    assert where.returncode == 0
    [res] = tool_results(m, "where")
    assert res["output"].strip() == str(work)


PENDING = [{"approval_id": i, "kind": "command", "tool": "terminal", "subject": s}
           for i, s in (("apr_3f01aa", "make"), ("apr_3f02bb", "test"), ("apr_9c00cc", "ls"))]


@pytest.mark.parametrize("given, found", [
    ("apr_3f01aa", "apr_3f01aa"), ("apr_3f01", "apr_3f01aa"), ("3f02", "apr_3f02bb"),
    ("apr_9c…", "apr_9c00cc"), ("9", "apr_9c00cc")])
def test_an_approval_prefix_names_one_pending_prompt(given, found):
    assert match_pending(PENDING, given)["approval_id"] == found


@pytest.mark.parametrize("given, reason, says", [
    ("apr_3f", "ambiguous", "'apr_3f' matches 2 pending approvals: apr_3f01aa (terminal "),
    ("3f0", "ambiguous", "apr_3f02bb"),
    ("apr_77", "not_pending", "no pending approval matches 'apr_77'"),
    ("…", "usage", "which approval?")])
def test_an_ambiguous_or_unknown_prefix_is_refused_clearly(given, reason, says):
    with pytest.raises(CliError) as err:
        match_pending(PENDING, given)
    assert err.value.reason == reason and says in err.value.detail, err.value.detail
