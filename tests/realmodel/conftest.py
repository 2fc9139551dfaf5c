"""Fixtures of the real-model suite: one llama-cpp-python server per chat format and
module (tests/llamaserver.py). CI does not install llama-cpp-python, so there the
suite is skipped, as it is anywhere the model is not installed."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from llamaserver import LlamaServer


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        Callable[[str], LlamaServer]]:
    """``llama_server(chat_format)``: a running server (one per format per module)."""
    running: dict[str, LlamaServer] = {}

    def get(chat_format: str) -> LlamaServer:
        if chat_format not in running:
            log = tmp_path_factory.mktemp("llama") / f"{chat_format}.log"
            running[chat_format] = LlamaServer(chat_format, log).start()
        return running[chat_format]

    yield get
    for server in running.values():
        server.stop()
