"""The editor's ``terminal/*`` as executor of the owner's sandboxed commands (docs/acp.md,
"The editor's terminals").

When the editor's ``clientCapabilities.terminal`` is true, every session this adapter
opens (``session/new``, ``session/load``, and again on the new connection after a
reconnect) is offered to the owner with terminal.offer. The owner's terminal tool then
sends ``terminal.request`` notices, one per step of a command it has already approved
and wrapped in its sandbox's argv; each is asked of the editor and answered with
terminal.respond:

- ``create`` → ``terminal/create`` with that argv, environment, working directory and
  output limit; the terminal is embedded in the tool call's card at once (``{"type":
  "terminal"}`` content), so the editor shows it live;
- ``output``, ``wait_for_exit``, ``kill``, ``release`` → the same ``terminal/*`` call.

An error the editor answers with is ``refused`` (it did not do it: a refused create
started nothing, and the owner runs the command itself); any other failure is not
(it may have). A terminal made after the owner stopped waiting for it is killed and
released here. The adapter never runs a command itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from acp import RequestError
from acp.schema import EnvVariable

from tether.rpc.errors import RpcError
from tether.rpc.models.terminal import TERMINAL_OUTPUT_MAX_CHARS

from .relay import Relay

__all__ = ["EditorTerminals"]

log = logging.getLogger("tether.acp")

#: shows a terminal in a tool call's card: (session_id, admission_id, call_id, terminal_id)
Embed = Callable[[str, Any, Any, str], Awaitable[None]]


def _status(status: Any) -> dict[str, Any] | None:
    if status is None:
        return None
    return {"exit_code": getattr(status, "exit_code", None),
            "signal": getattr(status, "signal", None)}


class EditorTerminals(Relay):
    """Whether the editor has terminals for the owner, and the answering of its requests."""

    def __init__(self, embed: Embed) -> None:
        super().__init__()
        self.enabled = False
        self._embed = embed

    def capabilities(self, client_capabilities: Any) -> None:
        """Take the editor's ``initialize`` capabilities (``terminal``)."""
        self.enabled = bool(getattr(client_capabilities, "terminal", False))

    async def offer(self, session_id: str) -> None:
        """Offer the session's sandboxed commands to the editor's terminals (nothing if
        it has none); a refusal is logged and the owner runs them itself."""
        if not self.enabled or self.tether is None:
            return
        if self.tether.connection is not None:  # this connection's notices come here
            self.tether.connection.notices["terminal.request"] = self.on_request
        try:
            held = await self.tether.call("terminal.offer", session_id=session_id)
        except RpcError as exc:
            log.warning("the editor's terminals were not offered for %s: %s", session_id,
                        exc.detail)
            return
        if held.get("run"):
            log.info("the editor's terminals run the sandboxed commands of %s", session_id)

    async def _answer(self, event: dict[str, Any]) -> None:
        p = event.get("payload") or {}
        sid, rid, op = event.get("session_id"), p.get("request_id"), p.get("op")
        if not (isinstance(sid, str) and isinstance(rid, str) and self.editor is not None):
            return
        answer: dict[str, Any]
        try:
            if op == "create":
                # not cut short at the deadline: a terminal the editor makes late is
                # known here, and killed below when the owner no longer waits for it
                answer = await self._do(sid, event.get("admission_id"), p)
            else:
                left = max(0.1, float(p.get("expires_at") or 0) - time.time())
                answer = await asyncio.wait_for(self._do(sid, None, p), left)
        except TimeoutError:
            return  # the owner has gone on without it
        except RequestError as exc:
            answer = {"error": f"the editor refused: {exc}"[:2000], "refused": True}
        except Exception as exc:  # the editor went away, or answered nonsense
            answer = {"error": f"the editor failed: {exc}"[:2000]}
        if self.tether is None:
            return
        try:
            await self.tether.call("terminal.respond", request_id=rid, **answer)
        except RpcError as exc:  # expired meanwhile: the owner went on without it
            log.info("the answer to %s was not taken: %s", rid, exc.detail)
            if op == "create" and "terminal_id" in answer:
                await self._drop(sid, answer["terminal_id"])
        except ConnectionError:
            if op == "create" and "terminal_id" in answer:
                await self._drop(sid, answer["terminal_id"])

    async def _do(self, sid: str, admission_id: Any, p: dict[str, Any]) -> dict[str, Any]:
        op, tid = p.get("op"), p.get("terminal_id")
        if op == "create":
            env = [EnvVariable(name=k, value=v) for k, v in (p.get("env") or {}).items()]
            made = await self.editor.create_terminal(
                session_id=sid, command=p["command"], args=list(p.get("args") or []),
                env=env, cwd=p.get("cwd"), output_byte_limit=p.get("output_byte_limit"))
            await self._embed(sid, admission_id, p.get("call_id"), made.terminal_id)
            return {"terminal_id": made.terminal_id}
        if not isinstance(tid, str):
            raise ValueError(f"a {op} request names no terminal")
        if op == "output":
            got = await self.editor.terminal_output(session_id=sid, terminal_id=tid)
            text, cut = got.output, bool(got.truncated)
            if len(text) > TERMINAL_OUTPUT_MAX_CHARS:
                text, cut = text[-TERMINAL_OUTPUT_MAX_CHARS:], True
            out: dict[str, Any] = {"output": text, "truncated": cut}
            if (status := _status(got.exit_status)) is not None:
                out["exit_status"] = status
            return out
        if op == "wait_for_exit":
            got = await self.editor.wait_for_terminal_exit(session_id=sid, terminal_id=tid)
            return {"exit_status": _status(got)}
        if op == "kill":
            await self.editor.kill_terminal(session_id=sid, terminal_id=tid)
            return {}
        if op == "release":
            await self.editor.release_terminal(session_id=sid, terminal_id=tid)
            return {}
        raise ValueError(f"unknown terminal request {op!r}")

    async def _drop(self, sid: str, terminal_id: str) -> None:
        """End a terminal the owner stopped waiting for (it reported the failure)."""
        for step in (self.editor.kill_terminal, self.editor.release_terminal):
            try:
                await step(session_id=sid, terminal_id=terminal_id)
            except Exception as exc:  # noqa: BLE001 - the editor's to keep or not
                log.info("terminal %s: %s", terminal_id, exc)

