"""``tether cron``: scheduled jobs (docs/cron.md) — add, list, show, edit, pause, resume, rm,
run, runs.

Each subcommand is one cron.* call; ``run`` fires the job now, waits for the
run like a finite chat and prints its answer, with chat's exit codes (0
completed, 1 failed/cancelled/interrupted/unknown). Imports beyond argparse are
made inside the commands, so the parser costs nothing on other paths.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from ..library.exits import CONTEXT, EXIT_OK, EXIT_USAGE, CliError
from .help import add_examples

__all__ = ["add_cron_parser", "cmd_cron"]

#: while `tether cron run` waits, the receipt is read at most this often (and at
#: least this often once it has waited a while)
POLL_FIRST_SECONDS = 0.05
POLL_MAX_SECONDS = 1.0
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(value: str) -> float:
    m = _DURATION.match(value.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"not a duration like 90s, 5m or 2h: {value!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _job_options(p: argparse.ArgumentParser, *, editing: bool) -> None:
    p.add_argument("--schedule", metavar="EXPR", required=not editing,
                   help="'0 9 * * 1-5', @daily, @hourly, 'every 30m', 'at 2026-12-01T09:00' "
                        "or 'in 20m'")
    p.add_argument("--tz", metavar="ZONE",
                   help="IANA time zone of the schedule (default: the owner's local zone)")
    query = p.add_mutually_exclusive_group(required=not editing)
    query.add_argument("-q", "--query", dest="q", metavar="TEXT", help="the prompt of every run")
    query.add_argument("--query-file", metavar="PATH", help="read the prompt from a file")
    p.add_argument("--provider", metavar="P", help="demo, openai or custom")
    p.add_argument("--model", metavar="M", help="model name")
    p.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint")
    p.add_argument("--toolsets", metavar="a,b",
                   type=lambda v: [t.strip() for t in v.split(",") if t.strip()],
                   help="comma-separated toolsets; empty for none")
    p.add_argument("--max-turns", metavar="N", type=int, help="model calls allowed per run")
    p.add_argument("--reasoning", choices=("none", "low", "medium", "high"),
                   help="reasoning effort")
    p.add_argument("--ignore-rules", action="store_true", default=None,
                   help="do not load project rules (AGENTS.md) from the working directory")
    p.add_argument("--sandbox", metavar="MODE", choices=("workspace-write", "read-only", "off"),
                   help="the sandbox of the runs' commands (at least as strict as the "
                        "owner's sandbox.mode)")
    p.add_argument("--cwd", metavar="DIR",
                   help="working directory of the runs" + ("" if editing else
                                                           " (default: this one)"))
    p.add_argument("--deliver", metavar="TARGET",
                   help="also deliver each answer: file:/abs/path.md or session:ID"
                        + (" ('none' stops delivering)" if editing else ""))
    p.add_argument("--overlap", choices=("skip", "queue"),
                   help="a time that comes while the last run still runs: skip it (default) or "
                        "run it after")
    p.add_argument("--missed", choices=("catch-up", "skip"),
                   help="times missed while no owner ran, past the grace: one catch-up run "
                        "(default) or none")
    p.add_argument("--grace", metavar="DURATION", type=_duration,
                   help="how late a missed time may still run normally (default: half the "
                        "period, 2m-2h)")


def add_cron_parser(command: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add ``tether cron …`` through cli.py's ``command(name, help, ...)`` helper;
    ``parser_class`` is the CLI's own (its error format)."""
    cron = command("cron", "scheduled jobs: prompts run on a schedule, each run a finite turn",
                   description="Scheduled jobs. Each run is a finite turn in a fresh session "
                               "(source cron); see docs/cron.md.")
    sub = cron.add_subparsers(dest="cron_command", metavar="SUBCOMMAND", parser_class=parser_class)
    sub.required = True

    p = sub.add_parser("add", help="create a job", description=(
        "Create a job: at each time of --schedule (in --tz, default the owner's zone) the "
        "prompt runs as a finite turn in a fresh session (source cron), in --cwd. Times "
        "missed while no owner ran get one catch-up run; a time that comes while the last "
        "run still runs is skipped (--overlap queue runs it after). `tether cron runs NAME` "
        "shows what each run did."))
    add_examples(p, "cron add")
    p.add_argument("name", metavar="NAME", help="a name for the job (unique; used by every "
                   "other cron command)")
    _job_options(p, editing=False)
    p.add_argument("--paused", action="store_true", help="create it paused")
    p = sub.add_parser("edit", help="change a job (only the options given)")
    p.add_argument("name", metavar="NAME")
    _job_options(p, editing=True)
    p = sub.add_parser("list", aliases=["ls"], help="list the jobs")
    p.add_argument("--json", action="store_true", help="print JSON lines")
    p = sub.add_parser("show", help="a job and its last run")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    for name, text in (("pause", "stop a job firing (missed times are recorded)"),
                       ("resume", "let a paused job fire again"),
                       ("rm", "delete a job and its run history")):
        p = sub.add_parser(name, help=text)
        p.add_argument("name", metavar="NAME")
    p = sub.add_parser("run", help="fire a job now, wait, and print its answer")
    p.add_argument("name", metavar="NAME")
    p.add_argument("-Q", "--quiet", action="store_true", help="print only the answer")
    p.add_argument("--json", action="store_true", help="print the finished run as JSON")
    p = sub.add_parser("runs", help="a job's run history, newest first")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="how many (default 20)")
    p.add_argument("--json", action="store_true", help="print JSON lines")
    cron.set_defaults(func=cmd_cron)


def cmd_cron(args: Any) -> int:
    import asyncio

    from .commands import _home

    home = _home(args)
    CONTEXT.command = f"cron {args.cron_command}"
    params = _params(args) if args.cron_command in ("add", "edit") else None
    from tether.rpc.errors import NotFound

    try:
        return asyncio.run(_cron(home, args, params))
    except NotFound as exc:
        raise CliError(EXIT_USAGE, exc.reason, exc.detail,
                       "`tether cron list` lists the jobs") from None


def _params(args: Any) -> dict[str, Any]:
    """cron.create / cron.update params from the flags given."""
    import os

    out: dict[str, Any] = {"name": args.name}
    prompt = args.q
    if args.query_file is not None:
        try:
            with open(args.query_file, encoding="utf-8") as f:
                prompt = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(EXIT_USAGE, "unreadable_query_file",
                           f"cannot read {args.query_file}: "
                           f"{getattr(exc, 'strerror', None) or exc}",
                           "give a readable UTF-8 text file") from None
    if prompt is not None:
        if not prompt.strip():
            raise CliError(EXIT_USAGE, "empty_query", "the prompt is empty",
                           'give it with -q "TEXT" or --query-file PATH')
        out["prompt"] = prompt
    for key in ("schedule", "tz", "provider", "model", "base_url", "toolsets", "max_turns",
                "reasoning", "ignore_rules", "sandbox", "overlap", "cwd"):
        if getattr(args, key) is not None:
            out[key] = getattr(args, key)
    if args.missed is not None:
        out["missed"] = args.missed.replace("-", "_")
    if args.grace is not None:
        out["grace_seconds"] = args.grace
    if args.deliver is not None:
        out["deliver"] = None if args.deliver == "none" else args.deliver
    if args.cron_command == "add":
        out["paused"] = args.paused
        if "cwd" not in out:
            try:
                out["cwd"] = os.getcwd()
            except OSError:
                pass
    return out


async def _cron(home: Any, args: Any, params: dict[str, Any] | None) -> int:
    from ..library.remote import connect_owner

    async with await connect_owner(home) as client:
        match args.cron_command:
            case "add":
                assert params is not None
                job = await client.call("cron.create", **params)
                print(f"cron job {job['name']}: {_when(job)}")
            case "edit":
                # sent as given, nulls included (--deliver none clears the target)
                conn = client.connection
                assert conn is not None and params is not None
                job = await conn.request("cron.update", params)
                print(f"cron job {job['name']}: {_when(job)}")
            case "list" | "ls":
                _print_jobs((await client.call("cron.list"))["jobs"], args.json)
            case "show":
                _print_job(await client.call("cron.get", name=args.name), args.json)
            case "pause" | "resume":
                job = await client.call(f"cron.{args.cron_command}", name=args.name)
                print(f"cron job {job['name']}: {_when(job)}")
            case "rm":
                await client.call("cron.remove", name=args.name)
                print(f"cron job {args.name} removed")
            case "runs":
                if args.limit < 1:
                    raise CliError(EXIT_USAGE, "usage", "--limit must be 1 or more",
                                   "see `tether cron runs --help`")
                page = await client.call("cron.runs", name=args.name, limit=min(args.limit, 500))
                job = await client.call("cron.get", name=args.name)
                denied = {} if args.json else {
                    r["run_id"]: await denied_calls(client, r.get("session_id"))
                    for r in page["runs"] if r.get("admission_status") == "terminal"}
                _print_runs(page["runs"], args.json, job["tz"], denied)
            case "run":
                return await _run_now(client, args)
    return EXIT_OK


async def _run_now(client: Any, args: Any) -> int:
    import asyncio

    import orjson

    from ..library.exits import receipt_exit, report

    run = await client.call("cron.run", name=args.name)
    sid, aid = run["session_id"], run["admission_id"]
    CONTEXT.session_id = sid
    if not args.quiet and not args.json:
        print(f"[tether] cron job {args.name}: run {run['run_id']} in session {sid} "
              f"(`tether attach {sid}` follows it)", file=sys.stderr)
    delay = POLL_FIRST_SECONDS
    while True:
        receipt = await client.resilient(lambda: client.receipt(sid, admission_id=aid))
        if receipt["status"] in ("terminal", "unknown") or receipt.get("paused_by"):
            break
        await asyncio.sleep(delay)
        delay = min(delay * 1.5, POLL_MAX_SECONDS)
    failure = receipt_exit(receipt)
    if args.json:
        done = await client.call("cron.runs", name=args.name, limit=20)
        mine = next((r for r in done["runs"] if r["run_id"] == run["run_id"]), run)
        sys.stdout.write(orjson.dumps(mine).decode() + "\n")
    elif failure is None:
        text = (receipt.get("result") or {}).get("text") or ""
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()
    return report(failure) if failure is not None else EXIT_OK


# -- printing -----------------------------------------------------------------


def _time(t: float | None, tz: str | None = None) -> str:
    """``t`` to the second (runs of `every 30s` jobs must be told apart) in the zone
    ``tz`` (the job's: its schedule is read there), else this machine's."""
    from datetime import datetime

    if t is None:
        return "-"
    zone = None
    if tz:
        from zoneinfo import ZoneInfo

        try:
            zone = ZoneInfo(tz)
        except (KeyError, ValueError, OSError):
            zone = None
    return datetime.fromtimestamp(t, zone).astimezone(zone).strftime("%Y-%m-%d %H:%M:%S")


def _when(job: dict[str, Any]) -> str:
    if job["paused"]:
        return f"paused ({job['schedule']}, {job['tz']})"
    if job["next_run_at"] is None:
        return f"done ({job['schedule']} has no more times)"
    return f"next run {_time(job['next_run_at'], job['tz'])} {job['tz']} ({job['schedule']})"


def _run_state(run: dict[str, Any], denied: int = 0) -> str:
    if run["status"] == "skipped":
        n = run.get("missed_count") or 0
        return f"skipped({run['skip_reason']})" + (f" x{n}" if n > 1 else "")
    if run.get("admission_status") == "terminal":
        # the turn completed, but without doing what a denied tool call would have
        return str(run.get("outcome")) + (f", {denied} denied" if denied else "")
    return str(run.get("admission_status") or "admitted")


def _first_line(run: dict[str, Any]) -> str:
    """The run's answer, its first line with text (or its error)."""
    from ..tui.render import shorten

    result = run.get("result") or {}
    text = result.get("error") or result.get("text") or ""
    line = next((ln for ln in str(text).splitlines() if ln.strip()), "")
    return shorten(line.strip(), 60) if line else "-"


async def denied_calls(client: Any, session_id: str | None) -> int:
    """How many tool calls of the run's session were denied (nobody could approve
    them: a run is unattended)."""
    import orjson

    if not session_id:
        return 0
    try:
        page = await client.call("session.events.since", session_id=session_id,
                                 after_seq=0, limit=10_000)
    except Exception:  # noqa: BLE001 - the session was deleted: nothing to count
        return 0
    count = 0
    for ev in page["events"]:
        if ev.get("type") != "tool.complete":
            continue
        try:
            result = orjson.loads((ev.get("payload") or {}).get("result") or "{}")
        except orjson.JSONDecodeError:
            continue
        count += bool(isinstance(result, dict) and result.get("denied"))
    return count


def _print_jobs(jobs: list[dict[str, Any]], as_json: bool) -> None:
    import orjson

    if as_json:
        for job in jobs:
            print(orjson.dumps(job).decode())
        return
    if not jobs:
        print("no cron jobs yet; `tether cron add NAME --schedule EXPR -q TEXT` adds one",
              file=sys.stderr)
        return
    print(f"{'NAME':<20}  {'SCHEDULE':<18}  {'ZONE':<16}  {'NEXT':<19}  STATE")
    for job in jobs:
        state = "paused" if job["paused"] else ("done" if job["next_run_at"] is None
                                                else "active")
        print(f"{job['name']:<20}  {job['schedule']:<18}  {job['tz']:<16}  "
              f"{_time(job['next_run_at'], job['tz']):<19}  {state}")


def _print_job(job: dict[str, Any], as_json: bool) -> None:
    import orjson

    if as_json:
        print(orjson.dumps(job).decode())
        return
    grace = f"{job['grace_seconds']:g}s" + (" (default)" if job["grace_default"] else "")
    opts = ", ".join(f"{k}={v}" for k, v in sorted(job["options"].items())
                     if v is not None) or "-"
    for label, value in (
            ("name", job["name"]), ("schedule", f"{job['schedule']} ({job['tz']})"),
            ("state", _when(job)), ("overlap", job["overlap"]),
            ("missed", job["missed"].replace("_", "-")), ("grace", grace),
            ("deliver", job["deliver"] or "-"), ("cwd", job["cwd"] or "-"), ("options", opts),
            ("prompt", " ".join(job["prompt"].split())[:200])):
        print(f"{label + ':':<10} {value}")
    if job.get("last_run"):
        run = job["last_run"]
        print(f"{'last run:':<10} {_time(run['scheduled_for'], job['tz'])} {_run_state(run)}"
              f" {_first_line(run)!r}"
              + (f" (session {run['session_id']})" if run.get("session_id") else ""))


def _print_runs(runs: list[dict[str, Any]], as_json: bool, tz: str | None = None,
                denied: dict[str, int] | None = None) -> None:
    import orjson

    if as_json:
        for run in runs:
            print(orjson.dumps(run).decode())
        return
    if not runs:
        print("no runs yet", file=sys.stderr)
        return
    denied = denied or {}
    print(f"{'SCHEDULED (' + (tz or 'local') + ')':<25}  {'KIND':<9}  {'OUTCOME':<24}  "
          f"{'DELIVERY':<9}  {'SESSION':<28}  ANSWER")
    for run in runs:
        state = _run_state(run, denied.get(run["run_id"], 0))
        print(f"{_time(run['scheduled_for'], tz):<25}  {run['kind']:<9}  {state:<24}  "
              f"{run.get('delivery_status') or '-':<9}  {run.get('session_id') or '-':<28}  "
              f"{_first_line(run)}")
