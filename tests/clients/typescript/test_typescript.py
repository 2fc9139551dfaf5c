"""The TypeScript client's own tests (Node's test runner) against the real owner.

``npm test`` in clients/typescript checks the generated types against ``tether
schema``, compiles with ``tsc --strict`` and runs test/*.test.mjs, which start
real owners on homes whose paths hold spaces. This test gives them a scripted
model (the fake provider) and the Python that runs the owner; it is skipped
where Node or the package's dependencies (``npm ci``) are missing, except in CI,
where it fails instead: .ci/run installs both. The fleet tests get a fresh
PostgreSQL schema (``TETHER_TEST_STORE``) where a server answers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pgstore
import pytest
from fakeprovider import FakeProvider, Held, is_child, text_reply, tool_call_reply

PACKAGE = Path(__file__).resolve().parents[3] / "clients" / "typescript"


#: an answer in markdown for the viewer page: a heading, a list, code, a table, a
#: long unbroken word, and HTML that must not run or load anything
MARKDOWN = """## Findings

- one **bold** point
- a [link](https://example.com/docs)

```python
print("hello")
```

| a | b |
|---|---|
| 1 | 2 |

> quoted from the log, not said here

averyveryveryveryveryveryverylongwordwithoutanyspacesthatmustnotwidenthepageatall

<img src=x onerror="window.__xss = 1"><script>window.__xss = 2</script>
"""


def model(release_dir: Path):
    """Delegates when asked to; runs a command that asks for approval when asked to;
    answers ``BIG`` prompts at length; holds an answer (``HOLD:<name>``) until the test
    creates ``release_dir/<name>``; otherwise answers with the prompt quoted."""

    def reply(req: dict):
        msgs = req["messages"]
        if is_child(req):
            return text_reply("child finished its part")
        prompt = [m for m in msgs if m["role"] == "user"][-1]["content"] or ""
        if msgs[-1]["role"] == "tool":
            if "show the steps" in prompt:
                return text_reply("Printed **both** lines.")
            ran = "run the sleep command" in prompt
            return text_reply("The command ran." if ran else "Joined the helpers' results.")
        if prompt.startswith("MARKDOWN"):
            return text_reply(MARKDOWN)
        if "show the steps" in prompt:
            # `sleep` is not read-only: the policy asks, so the page shows an approval
            return tool_call_reply("terminal", {"command": "sh -c 'echo alpha; echo beta; sleep 0'"})
        if prompt.startswith("BIG"):
            return text_reply(prompt + " " + "x" * 60_000)  # fills socket buffers fast
        if prompt.startswith("[delegation results]"):
            return text_reply("Background results received.")
        if "run the sleep command" in prompt:
            return tool_call_reply("terminal", {"command": "sleep 0"})  # asks (mode ask)
        if "delegate" in prompt and not any(m["role"] == "tool" for m in msgs):
            return tool_call_reply("delegate_task", {"tasks": [{"goal": "a helper's part"}]})
        if "HOLD:" in prompt:
            name = prompt.split("HOLD:", 1)[1].split()[0]
            gate = threading.Event()

            def watch() -> None:
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and not (release_dir / name).exists():
                    time.sleep(0.05)
                gate.set()

            threading.Thread(target=watch, daemon=True).start()
            return Held({"role": "assistant", "content": f"Held answer for {name}, now done."},
                        gate, before=2)
        return text_reply(f"You said: {prompt}")

    return reply


@contextmanager
def fleet_store() -> Iterator[str | None]:
    """A fresh PostgreSQL schema for the suite's fleet tests; None where no server
    answers (those tests then skip, unless pgstore requires PostgreSQL: then this fails)."""
    if pgstore.unavailable() is not None and not os.environ.get("TETHER_REQUIRE_POSTGRES"):
        yield None
        return
    with pgstore.fresh_schema() as url:
        yield url


@pytest.mark.timeout(660)  # a whole suite of its own: owners, restarts, a browser
def test_typescript_client_suite(tmp_path):
    npm = shutil.which("npm")
    if npm is None or not (PACKAGE / "node_modules").is_dir():
        if os.environ.get("CI"):
            pytest.fail("CI must run the TypeScript tests: .ci/run installs node and runs npm ci")
        pytest.skip("node/npm or clients/typescript/node_modules missing (run npm ci there)")
    release = tmp_path / "release"
    release.mkdir()
    tether = Path(sys.executable).with_name("tether")
    with FakeProvider(model(release)) as provider, fleet_store() as store:
        env = {**os.environ, "TETHER_PYTHON": sys.executable, "TETHER_BIN": str(tether),
               "TETHER_TEST_PROVIDER_URL": provider.url, "TETHER_TEST_RELEASE_DIR": str(release)}
        env.pop("TETHER_HOME", None)
        if store is not None:
            env["TETHER_TEST_STORE"] = store
        proc = subprocess.run([npm, "test"], cwd=PACKAGE, env=env, capture_output=True,
                              text=True, timeout=600, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "# fail 0" in out, out[-3000:]


def _readme_examples() -> list[str]:
    """The TypeScript blocks of the package's README, in order."""
    import re

    text = (PACKAGE / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```ts\n(.*?)```", text, re.S)


@pytest.mark.timeout(300)
def test_the_packed_tarball_installs_imports_and_compiles_strictly(tmp_path):
    """`npm pack` ships what an import needs; a fresh project installs the tarball,
    imports it at run time, and compiles the README's examples with ``tsc --strict``."""
    import json
    import tarfile

    npm = shutil.which("npm")
    if npm is None or not (PACKAGE / "node_modules").is_dir():
        if os.environ.get("CI"):
            pytest.fail("CI must run the TypeScript tests: .ci/run installs node and runs npm ci")
        pytest.skip("node/npm or clients/typescript/node_modules missing (run npm ci there)")

    def run(*cmd: str, cwd: Path) -> str:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=240,
                              check=False)
        assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        return proc.stdout

    packed = json.loads(run(npm, "pack", "--json", "--pack-destination", str(tmp_path),
                            cwd=PACKAGE))
    tarball = tmp_path / packed[0]["filename"]
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
        license_text = tar.extractfile("package/LICENSE").read().decode()  # type: ignore[union-attr]
    shipped = {n.removeprefix("package/") for n in names}
    for module in ("index", "core", "node", "browser", "protocol"):
        assert {f"dist/{module}.js", f"dist/{module}.d.ts"} <= shipped, sorted(shipped)
    assert {"package.json", "README.md", "LICENSE"} <= shipped
    assert not [n for n in shipped if n.startswith(("src/", "test/", "node_modules/"))]
    assert license_text == (PACKAGE.parents[1] / "LICENSE").read_text(encoding="utf-8")

    project = tmp_path / "consumer project"
    project.mkdir()
    (project / "package.json").write_text(json.dumps(
        {"name": "consumer", "version": "1.0.0", "private": True, "type": "module"}))
    run(npm, "install", "--prefer-offline", "--no-audit", "--no-fund", str(tarball), cwd=project)
    imported = run("node", "--input-type=module", "-e",
                   "const m = await import('tether-client');"
                   "const b = await import('tether-client/browser');"
                   "console.log(typeof m.connect, typeof b.connectBrowser, m.PROTOCOL)",
                   cwd=project)
    assert imported.split() == ["function", "function", "tether/1"]

    examples = _readme_examples()
    assert len(examples) >= 6  # connect, submit, stream, approvals, failover, versions
    for n, code in enumerate(examples):
        (project / f"example{n}.ts").write_text(code, encoding="utf-8")
    (project / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext",
        "lib": ["ES2022"], "strict": True, "noEmit": True, "skipLibCheck": False,
        "types": ["node"], "typeRoots": [str(PACKAGE / "node_modules" / "@types")]},
        "include": ["*.ts"]}))
    run(str(PACKAGE / "node_modules" / ".bin" / "tsc"), "-p", "tsconfig.json", "--strict",
        cwd=project)
