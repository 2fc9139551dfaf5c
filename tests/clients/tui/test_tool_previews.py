"""What a viewer sees of a tool call: under its summary, an edit's diff and the last
lines of a command's output (their escape sequences shown, never obeyed) — live in
the chat and attach, and when attach replays the stored transcript."""

from __future__ import annotations

import subprocess

from clihelp import CLI, read_until
from fakeprovider import FakeProvider
from harness import OwnerProcess, clean_env, write_config
from toolscript import ScriptedModel

EXPECTED = """\
  ·   → edited {path} at line 2
      @@ -1,3 +1,3 @@
       alpha
      -beta
      +BETA
       gamma
  · tool terminal
  ·   → exit 0 · 10 lines of output
      … 5 lines before
      6
      7
      8
      9
      bad?[2J
"""


def test_attach_shows_diffs_and_output_lines(tmp_path, run_cli):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    model = ScriptedModel({
        "edit": [("edit_file", {"path": "notes.txt", "old": "beta", "new": "BETA"}),
                 ("terminal", {"command": "seq 1 9; printf 'bad\\033[2J\\n'"})]})
    home = tmp_path / "home"
    with FakeProvider(model) as fake:
        write_config(home, fake.url, approvals={"mode": "auto"})
        env = clean_env(home, NO_COLOR="1")
        with OwnerProcess(home, env=env):
            done = run_cli(home, "chat", "-Q", "-q", "edit the notes", cwd=work)
            assert done.returncode == 0, done
            attach = subprocess.Popen([*CLI, "attach", "--last"], env=env,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT)
            try:
                seen = read_until(attach, b"(following;").decode()
            finally:
                attach.kill()
                attach.communicate(timeout=30)
    assert EXPECTED.format(path=work / "notes.txt") in seen, seen
    assert "\x1b" not in seen


def test_long_progress_lines_wrap_at_words_under_their_text_on_a_terminal(monkeypatch):
    import io
    import os

    from tether.clients.tui.render import Renderer

    monkeypatch.setattr("shutil.get_terminal_size", lambda *a, **k: os.terminal_size((60, 20)))
    line = ("delegation dlg_44d13a3a839b7630d9e955c5 runs in the background (2 tasks); "
            "its results will arrive as a new turn")
    shown = io.StringIO()
    Renderer(shown, color=True).progress(line)
    rows = shown.getvalue().replace("\x1b[2m", "").replace("\x1b[0m", "").splitlines()
    assert len(rows) > 1 and all(len(r) <= 59 for r in rows)
    assert rows[0].startswith("  · delegation") and all(r.startswith("    ") for r in rows[1:])
    assert " ".join(r.strip() for r in rows).removeprefix("· ") == line
    # a pipe (no markdown) gets the line whole, for scripts that read it
    piped = io.StringIO()
    Renderer(piped, color=False).progress(line)
    assert piped.getvalue() == f"  · {line}\n"
