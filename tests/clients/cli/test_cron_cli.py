"""`tether cron` as a user runs it: the real CLI against a real owner and the fake model."""

from __future__ import annotations

import json

from fakeprovider import FakeProvider, text_reply
from harness import OwnerProcess, write_config


def test_add_run_show_runs_and_rm(tmp_path, run_cli):
    home = tmp_path / "home"
    with FakeProvider(lambda req: text_reply("CRON_ANSWER")) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home):
            added = run_cli(home, "cron", "add", "nightly", "--schedule", "0 3 * * *",
                            "--tz", "Europe/Berlin", "-q", "Summarise the day")
            assert added.returncode == 0, added.stderr
            assert "nightly" in added.stdout and "Europe/Berlin" in added.stdout

            ran = run_cli(home, "cron", "run", "nightly")
            assert ran.returncode == 0, ran.stderr
            assert ran.stdout == "CRON_ANSWER\n"

            listed = run_cli(home, "cron", "runs", "nightly", "--json")
            assert listed.returncode == 0, listed.stderr
            (run,) = [json.loads(line) for line in listed.stdout.splitlines()]
            assert run["kind"] == "manual" and run["outcome"] == "completed"
            assert run["input_id"].startswith("cron:nightly:")

            shown = run_cli(home, "cron", "show", "nightly")
            assert shown.returncode == 0 and "0 3 * * * (Europe/Berlin)" in shown.stdout

            paused = run_cli(home, "cron", "pause", "nightly")
            assert paused.returncode == 0 and "paused" in paused.stdout
            jobs = run_cli(home, "cron", "list")
            assert "nightly" in jobs.stdout and "paused" in jobs.stdout

            assert run_cli(home, "cron", "rm", "nightly").returncode == 0
            gone = run_cli(home, "cron", "run", "nightly")
            assert gone.returncode == 2 and "not_found" in gone.stderr
            assert "tether cron list" in gone.stderr


def test_a_failed_run_exits_1_and_a_bad_schedule_exits_2_naming_it(tmp_path, run_cli):
    home = tmp_path / "home"
    from fakeprovider import Status

    with FakeProvider(lambda req: Status(400, '{"error": {"message": "no such model"}}')) \
            as fake:
        write_config(home, fake.url)
        with OwnerProcess(home):
            bad = run_cli(home, "cron", "add", "x", "--schedule", "every fortnight", "-q", "p")
            assert bad.returncode == 2
            assert "invalid_params: schedule:" in bad.stderr and "Traceback" not in bad.stderr
            assert run_cli(home, "cron", "add", "x", "--schedule", "@daily",
                           "-q", "p").returncode == 0
            failed = run_cli(home, "cron", "run", "x", "-Q")
            assert failed.returncode == 1 and failed.stdout == ""
            assert "turn_failed" in failed.stderr


def test_times_in_the_jobs_zone_and_runs_with_outcome_denials_and_answer(tmp_path, run_cli):
    from fakeprovider import tool_call_reply

    def model(req):
        if req["messages"][-1]["role"] == "tool":
            return text_reply("\nCould not touch the file: it was denied.\nMore detail here.")
        return tool_call_reply("terminal", {"command": "touch cron-made-this"})

    home = tmp_path / "home"
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home):
            assert run_cli(home, "cron", "add", "morning", "--schedule", "0 9 * * *",
                           "--tz", "Asia/Tokyo", "-q", "make the file").returncode == 0
            jobs = run_cli(home, "cron", "list")
            shown = run_cli(home, "cron", "show", "morning")
            ran = run_cli(home, "cron", "run", "morning")
            runs = run_cli(home, "cron", "runs", "morning")
    # 09:00 in Tokyo, whatever this machine's zone
    [row] = jobs.stdout.splitlines()[1:]
    assert " 09:00:00 " in row and "Asia/Tokyo" in row, jobs.stdout
    assert "next run " in shown.stdout and " 09:00:00 Asia/Tokyo (0 9 * * *)" in shown.stdout
    assert ran.returncode == 0, ran
    header, line = runs.stdout.splitlines()
    assert header.startswith("SCHEDULED (Asia/Tokyo)") and header.endswith("ANSWER"), header
    # the turn completed, and the table says its command was not run
    assert "completed, 1 denied" in line, line
    assert line.endswith("Could not touch the file: it was denied."), line
