"""The file tools' path rules (daemon/toolsets/paths.py), in-process and on a real
filesystem: symlinks never lead out of the working directory, temp files never
follow a planted symlink, the owner's home is refused outright. Every test runs
twice: with the kernel's openat2 and with the O_NOFOLLOW walk that replaces it."""

from __future__ import annotations

import json
import os
import stat
from typing import Any

import pytest

from tether.daemon.approvals.policy import Verdict
from tether.daemon.config.core import ToolsConfig
from tether.daemon.engine.tools import ToolContext
from tether.daemon.toolsets import paths
from tether.daemon.toolsets.files import file_tools


@pytest.fixture(params=["openat2", "walk"])
def resolver(request, monkeypatch):
    if request.param == "openat2":
        if not paths.OPENAT2.available():
            pytest.skip("this kernel has no openat2")
    else:
        monkeypatch.setattr(paths.OPENAT2, "enabled", False)
    return request.param


class Asked:
    """The approval capability, recording what the tools asked about."""

    def __init__(self, allow: bool = True) -> None:
        self.allow = allow
        self.subjects: list[tuple[str, str]] = []

    async def __call__(self, tool: str, kind: str, subject: str) -> Verdict:
        self.subjects.append((tool, subject))
        return Verdict(self.allow, "answered" if self.allow else "denied: no")


def context(cwd: Any, approve: Asked) -> ToolContext:
    async def emit(kind: str, payload: dict[str, Any]) -> None:
        pass

    return ToolContext(session_id="s", admission_id=None, call_id="c", depth=0,
                       settings=None, late_delivery=False, emit=emit,  # type: ignore[arg-type]
                       cwd=str(cwd), attended=True, approve=approve)


@pytest.fixture
def world(tmp_path):
    """A working directory, an outside directory with a file, and an owner's home."""
    work, outside, home = tmp_path / "work", tmp_path / "outside", tmp_path / "home"
    for d in (work, outside, home):
        d.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE-ORIGINAL\n")
    (home / "config.yaml").write_text("model:\n  api_key: sk-HOME-KEY\n")
    return work, outside, home


async def call(home, cwd, name: str, args: dict[str, Any], approve: Asked | None = None
               ) -> dict[str, Any]:
    tools = {t.name: t for t in file_tools(ToolsConfig(), home=str(home))}
    return json.loads(await tools[name].run(args, context(cwd, approve or Asked())))


async def test_reads_and_writes_in_the_working_directory_still_work(world, resolver):
    work, _, home = world
    asked = Asked()
    w = await call(home, work, "write_file", {"path": "a/b/c.txt", "content": "one\n"}, asked)
    assert w["created"] is True and (work / "a/b/c.txt").read_text() == "one\n"
    assert asked.subjects == [("write_file", str(work / "a/b/c.txt"))]
    r = await call(home, work, "read_file", {"path": str(work / "a/b/c.txt")})
    assert r["content"] == "     1\tone" and r["path"] == str(work / "a/b/c.txt")
    e = await call(home, work, "edit_file", {"path": "a/b/c.txt", "old": "one", "new": "two"})
    assert e["replacements"] == 1 and (work / "a/b/c.txt").read_text() == "two\n"
    # a symlink that stays inside is followed: the edit lands in its target
    os.symlink("b/c.txt", work / "a" / "inner-link")
    e2 = await call(home, work, "edit_file", {"path": "a/inner-link", "old": "two",
                                              "new": "three"})
    assert e2["path"] == str(work / "a/b/c.txt") and (work / "a/b/c.txt").read_text() == \
        "three\n"
    assert os.path.islink(work / "a" / "inner-link")
    listing = await call(home, work, "list_dir", {"path": "a"})
    assert {"name": "b/", "size": None} in listing["entries"]
    # no temp file is left behind, and the mode of a replaced file is kept
    os.chmod(work / "a/b/c.txt", 0o640)
    await call(home, work, "write_file", {"path": "a/b/c.txt", "content": "four\n"})
    assert stat.S_IMODE(os.stat(work / "a/b/c.txt").st_mode) == 0o640
    assert sorted(os.listdir(work / "a/b")) == ["c.txt"]


@pytest.mark.parametrize("planted", ["old", "any"])
async def test_a_symlink_planted_at_a_temp_name_is_never_followed(world, resolver, planted):
    work, outside, home = world
    (work / "f.txt").write_text("before\n")
    # the old predictable name, and (since names are random now) a flood of names
    # a guesser could plant: none of them is written through
    names = [f"f.txt.tether-{os.getpid()}.tmp"] if planted == "old" else \
        [f".f.txt.{i:016x}.tether.tmp" for i in range(64)]
    for name in names:
        os.symlink(outside / "secret.txt", work / name)
    w = await call(home, work, "write_file", {"path": "f.txt", "content": "after\n"})
    assert w["created"] is False and (work / "f.txt").read_text() == "after\n"
    e = await call(home, work, "edit_file", {"path": "f.txt", "old": "after", "new": "again"})
    assert e["replacements"] == 1 and (work / "f.txt").read_text() == "again\n"
    assert (outside / "secret.txt").read_text() == "OUTSIDE-ORIGINAL\n"
    assert all(os.path.islink(work / n) for n in names)


async def test_a_symlink_out_of_the_working_directory_is_refused(world, resolver):
    work, outside, home = world
    os.symlink("/etc/passwd", work / "passwd")
    os.symlink(outside / "secret.txt", work / "out.txt")
    os.symlink("../outside", work / "outdir")
    asked = Asked()
    for name, args in [("read_file", {"path": "passwd"}), ("read_file", {"path": "out.txt"}),
                       ("read_file", {"path": "outdir/secret.txt"}),
                       ("write_file", {"path": "out.txt", "content": "x"}),
                       ("write_file", {"path": "outdir/new.txt", "content": "x"}),
                       ("edit_file", {"path": "outdir/secret.txt", "old": "OUT", "new": "x"}),
                       ("list_dir", {"path": "outdir"}),
                       ("search_files", {"pattern": "OUT", "path": "outdir"})]:
        out = await call(home, work, name, args, asked)
        assert out["refused"] == "escape", (name, args, out)
        assert "leads outside the working directory" in out["error"]
        assert "OUTSIDE" not in json.dumps(out)
    assert asked.subjects == []  # refused, never asked
    assert (outside / "secret.txt").read_text() == "OUTSIDE-ORIGINAL\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]


async def test_paths_outside_read_as_named_and_writes_there_ask(world, resolver):
    work, outside, home = world
    r = await call(home, work, "read_file", {"path": "../outside/secret.txt"})
    assert "OUTSIDE-ORIGINAL" in r["content"]
    os.symlink(outside / "secret.txt", outside / "link.txt")
    link = await call(home, work, "read_file", {"path": str(outside / "link.txt")})
    assert link["refused"] == "link" and "symbolic link" in link["error"]
    denied = Asked(allow=False)
    w = await call(home, work, "write_file", {"path": "../outside/secret.txt",
                                              "content": "x"}, denied)
    assert w["denied"] is True and denied.subjects == [("write_file",
                                                        str(outside / "secret.txt"))]
    assert (outside / "secret.txt").read_text() == "OUTSIDE-ORIGINAL\n"
    # approved, it is written; through a symlink at the name, never
    ok = await call(home, work, "write_file", {"path": str(outside / "new.txt"),
                                               "content": "approved\n"})
    assert ok["created"] is True and (outside / "new.txt").read_text() == "approved\n"
    asked = Asked()
    via = await call(home, work, "write_file", {"path": str(outside / "link.txt"),
                                                "content": "x"}, asked)
    assert via["refused"] == "link" and asked.subjects == []
    assert (outside / "secret.txt").read_text() == "OUTSIDE-ORIGINAL\n"


async def test_the_owners_home_is_forbidden_not_asked(world, resolver):
    work, _, home = world
    asked = Asked()
    config = str(home / "config.yaml")
    os.symlink(home, work / "home-link")
    os.link(home / "config.yaml", work / "hard.yaml")
    cases = [("read_file", {"path": config}),
             ("write_file", {"path": config, "content": "x"}),
             ("edit_file", {"path": config, "old": "api_key", "new": "x"}),
             ("read_file", {"path": "hard.yaml"}),
             ("search_files", {"pattern": "api_key", "path": str(home)}),
             ("list_dir", {"path": str(home)})]
    for name, args in cases:
        out = await call(home, work, name, args, asked)
        assert out["refused"] == "forbidden", (name, out)
        assert "the owner's home" in out["error"] and "sk-HOME-KEY" not in json.dumps(out)
    # the owner's own process: its environment holds its keys
    for path in ("/proc/self/environ", f"/proc/{os.getpid()}/cmdline", "/proc/self/status"):
        out = await call(home, work, "read_file", {"path": path}, asked)
        assert out["refused"] == "forbidden" and "/proc" in out["error"], out
    assert (await call(home, work, "list_dir", {"path": f"/proc/{os.getpid()}"}))[
        "refused"] == "forbidden"
    assert (await call(home, work, "list_dir", {"path": "/proc/self"}))["refused"] == "link"
    # a symlink into it leads outside the working directory first
    assert (await call(home, work, "read_file", {"path": "home-link/config.yaml"}))[
        "refused"] == "escape"
    # the working directory inside the home, or the home inside the working directory
    inner = home / "project"
    inner.mkdir()
    assert (await call(home, inner, "write_file", {"path": "x.txt", "content": "x"},
                       asked))["refused"] == "forbidden"
    nested_home = work / "nested-home"
    nested_home.mkdir()
    (nested_home / "config.yaml").write_text("api_key: sk-NESTED\n")
    for name, args in [("read_file", {"path": "nested-home/config.yaml"}),
                       ("write_file", {"path": "nested-home/new/x", "content": "x"})]:
        assert (await call(nested_home, work, name, args, asked))["refused"] == "forbidden"
    found = await call(nested_home, work, "search_files", {"pattern": "sk-NESTED"})
    assert found["matches"] == []
    assert asked.subjects == []
    assert (home / "config.yaml").read_text() == "model:\n  api_key: sk-HOME-KEY\n"
    assert not (inner / "x.txt").exists() and not (nested_home / "new").exists()


async def test_special_files_and_traversal_are_refused_cleanly(world, resolver):
    work, _, home = world
    os.mkfifo(work / "pipe")
    fifo = await call(home, work, "read_file", {"path": "pipe"})
    assert "not a regular file" in fifo["error"]
    assert "is a directory" in (await call(home, work, "read_file", {"path": "."}))["error"]
    deep = "../" * 40 + "etc/hostname"
    out = await call(home, work, "read_file", {"path": deep})
    assert "error" not in out or "No such file" in out["error"]
    os.symlink("loop", work / "loop")
    assert "error" in await call(home, work, "read_file", {"path": "loop"})
    (work / "adir").mkdir()
    asked = Asked()
    out = await call(home, work, "write_file", {"path": "adir", "content": "x"}, asked)
    assert "is a directory" in out["error"] and asked.subjects == []
