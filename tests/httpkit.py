"""Helpers of the HTTP endpoint's end-to-end tests: a token minted on the real
owner, its ``/v1`` URL, and ``openai`` clients closed after each test."""

from __future__ import annotations

from typing import Any

import openai
from harness import OwnerProcess, Peer
from scene import Store

__all__ = ["api_admissions", "base_url", "mint", "Clients"]


async def mint(owner: OwnerProcess, **params: Any) -> str:
    async with await Peer.connect(owner.home) as peer:
        return str((await peer.result("token.create", label="api", **params))["token"])


def base_url(owner: OwnerProcess) -> str:
    return owner.descriptor["tcp_url"].replace("ws://", "http://").rstrip("/") + "/v1"


def api_admissions(store: Store) -> list[tuple]:
    """(principal, status, outcome, session source) of every admission, in order."""
    return store.rows("SELECT a.principal_id, a.status, a.outcome, s.source "
                      "FROM session_admissions a JOIN sessions s "
                      "ON s.session_id = a.target_session_id ORDER BY a.seq")


class Clients:
    """``openai.AsyncOpenAI`` clients of one test, closed together at its end."""

    def __init__(self) -> None:
        self._made: list[openai.AsyncOpenAI] = []

    def __call__(self, owner: OwnerProcess, token: str, **options: Any) -> openai.AsyncOpenAI:
        options = {"max_retries": 0, "timeout": 60, **options}
        made = openai.AsyncOpenAI(base_url=base_url(owner), api_key=token, **options)
        self._made.append(made)
        return made

    async def close(self) -> None:
        while self._made:
            await self._made.pop().close()
