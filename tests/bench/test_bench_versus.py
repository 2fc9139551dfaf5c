"""`tether bench --phases oneshot_fanout`: the one-shot whose prompt fans out, and
the comparison with another agent's one-shot (``--hermes PATH``).

hermes-agent is not a dependency, so the comparison runs here against stand-ins:
a program that talks to the bench's model server the way an agent that fans
out does, and one that prints the answer without fanning out, which the bench
must refuse to time."""

import os
import sqlite3
import subprocess
import sys
import textwrap

import orjson

from tether.bench.modelserver import ANSWER, FANNED_OUT, FANOUT, _reply

TOOLS = [{"type": "function", "function": {"name": "delegate_task", "parameters": {}}}]


def test_the_model_fans_out_once_then_answers_after_the_helpers():
    ask = {"messages": [{"role": "user", "content": f"{FANOUT} three parts"}], "tools": TOOLS}
    call = _reply(ask)
    assert isinstance(call, dict) and len(call["tasks"]) == 3
    assert all(t["goal"] for t in call["tasks"])
    after = {**ask, "messages": ask["messages"] + [
        {"role": "assistant", "tool_calls": []}, {"role": "tool", "content": "done"}]}
    assert _reply(after) == FANNED_OUT
    # a helper's own prompt, a prompt that does not ask, or no delegate tool: the answer
    assert _reply({"messages": [{"role": "user", "content": "part 1 of 3"}],
                   "tools": TOOLS}) == ANSWER
    assert _reply({"messages": [{"role": "user", "content": f"{FANOUT} x"}]}) == ANSWER
    listed = {"messages": [{"role": "user", "content": [{"type": "text",
                                                         "text": f"{FANOUT} x"}]}],
              "tools": TOOLS}
    assert isinstance(_reply(listed), dict)


def _bench(tmp_path, *extra):
    home = tmp_path / "bench-home"
    proc = subprocess.run(
        [sys.executable, "-m", "tether.bench", "--quick", "--json", "--home", str(home),
         "--phases", "oneshot_fanout", *extra],
        capture_output=True, timeout=240, stdin=subprocess.DEVNULL)
    return home, proc


def test_tether_one_shot_fans_out_inline_and_is_timed(tmp_path):
    home, proc = _bench(tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    data = orjson.loads(proc.stdout.decode().strip().splitlines()[-1])["oneshot_fanout"]
    assert data["helpers"] == 3 and data["runs"] == 2
    assert 0 < data["tether_ms"]["min"] <= data["tether_ms"]["p50"] <= data["tether_ms"]["max"]
    assert "hermes_ms" not in data
    db = sqlite3.connect(home / "state.db")
    try:
        parents = db.execute("SELECT session_id FROM sessions WHERE parent_session_id IS NULL "
                             "AND title LIKE 'fan out%'").fetchall()
        helpers = db.execute("SELECT count(*) FROM sessions WHERE parent_session_id "
                             "IS NOT NULL").fetchone()[0]
        left = db.execute("SELECT count(*) FROM async_delegations").fetchone()[0]
    finally:
        db.close()
    # the warm-up and two timed runs, each with its three helpers joined inline
    assert len(parents) == 3 and helpers == 9 and left == 0


AGENT = textwrap.dedent("""\
    import json, os, sys, urllib.request
    conf = open(os.path.join(os.environ["HERMES_HOME"], "config.yaml")).read()
    url = conf.split("base_url: ")[1].split()[0]
    tools = [{"type": "function", "function": {"name": "delegate_task", "parameters": {}}}]

    def ask(messages, with_tools=True):
        body = {"model": "bench-model", "messages": messages}
        if with_tools:
            body["tools"] = tools
        req = urllib.request.Request(url + "/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        return json.load(urllib.request.urlopen(req))["choices"][0]["message"]

    assert sys.argv[1] == "-z"
    first = [{"role": "user", "content": sys.argv[2]}]
    if os.environ.get("SKIP_FANOUT"):
        print("fanned out: the helpers answered")
        sys.exit(0)
    call = ask(first)["tool_calls"][0]
    tasks = json.loads(call["function"]["arguments"])["tasks"]
    results = [ask([{"role": "user", "content": t["goal"]}], False)["content"] for t in tasks]
    final = ask(first + [{"role": "assistant", "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": call["id"],
                          "content": json.dumps(results)}])
    print(final["content"])
    """)


def _launcher(tmp_path, env=""):
    """A `hermes` stand-in: AGENT run by this interpreter, with ``env`` set."""
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    launcher = tmp_path / "hermes"
    launcher.write_text(f"#!/bin/sh\n{env} exec {sys.executable} {agent} \"$@\"\n")
    launcher.chmod(0o755)
    return launcher


def test_the_comparison_times_both_alternating_and_reports_the_ratio(tmp_path):
    _, proc = _bench(tmp_path, "--hermes", str(_launcher(tmp_path)))
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    data = orjson.loads(proc.stdout.decode().strip().splitlines()[-1])["oneshot_fanout"]
    assert data["hermes_ms"]["p50"] > 0 and data["tether_ms"]["p50"] > 0
    assert data["hermes_over_tether"] == round(
        data["hermes_ms"]["p50"] / data["tether_ms"]["p50"], 1)
    assert (tmp_path / "bench-home" / "hermes-home" / "config.yaml").exists()


def test_a_run_that_does_not_fan_out_is_not_a_figure(tmp_path):
    launcher = _launcher(tmp_path, "SKIP_FANOUT=1")
    _, proc = _bench(tmp_path, "--hermes", str(launcher))
    assert proc.returncode == 1
    assert "did not fan out as asked" in proc.stderr.decode()
    assert os.path.basename(str(launcher)) in proc.stderr.decode()
