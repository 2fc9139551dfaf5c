"""``tether acp``: the Agent Client Protocol over stdio, as a viewer of the owner.

An editor (Zed, a JetBrains IDE, Neovim's CodeCompanion) starts ``tether acp``
and speaks ACP on its stdin and stdout (the ``agent-client-protocol``
package). This process holds no session of its own: it connects to the
home's owner (starting it, as ``tether chat`` does) and maps the two
protocols. ACP session ids are tether session ids, so a session outlives the
editor: close it mid-turn, the turn finishes in the owner; open it again
(``session/load``) and the transcript is replayed.

- ``session/new`` → session.create in the editor's ``cwd``;
- ``session/load`` → session.resume; the transcript is replayed as updates;
  ``session/list`` → session.list (top-level sessions, filtered by ``cwd``);
- ``session/prompt`` → prompt.submit with an input id (from the editor's
  ``_meta.messageId`` when it sends one, else fresh), resubmitted with the same
  id if the owner connection drops; it returns when the admission ends;
- every event of an open session → ``session/update`` (updates.py);
- ``approval.requested`` → ``session/request_permission``; an answer given elsewhere
  first (``approval.resolved``) withdraws the editor's request (asking.py);
- ``session/cancel`` → prompt.cancel of the running prompt;
- config options (and session modes) ``sandbox`` and ``approvals``
  (options.py): the editor may make this session's sandbox stricter,
  carried by each prompt.submit; approvals.mode is shown, not changeable;
- the editor's ``fs/read_text_file`` / ``fs/write_text_file`` execute the file
  tools' checked reads and writes of the sessions it opens (files.py), and its
  ``terminal/*`` their sandboxed commands, shown in the tool calls (terminals.py);
- the context window's fill and the session's cost → ``usage_update`` after each
  turn and on ``session/load`` (usage.py).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from functools import partial
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp.schema import (
    AgentCapabilities,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SessionCapabilities,
    SessionListCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    StopReason,
)

from tether.rpc.errors import RpcError

from ..library.client import OwnerUnavailable, TetherClient
from .asking import Asking
from .files import EditorFiles
from .options import APPROVALS, SANDBOX, Settings
from .servers import attach_mcp
from .session import OpenSession
from .terminals import EditorTerminals
from .updates import (
    call_id,
    cut_off,
    error_for,
    event_updates,
    input_id_for,
    prompt_text,
    session_page,
    transcript_updates,
    turn_usage,
)

__all__ = ["TetherAgent", "cmd_acp"]

log = logging.getLogger("tether.acp")

#: while a prompt runs with no event at all, look at its receipt this often
POLL_SECONDS = 15.0
_STOP: dict[str, StopReason] = {"completed": "end_turn", "failed": "end_turn", "cancelled": "cancelled",
         "interrupted": "cancelled"}


class TetherAgent:
    def __init__(self, home: Any, version: str) -> None:
        self._home = home
        self._version = version
        self._tether: TetherClient | None = None
        self._editor: Any = None
        self._sessions: dict[str, OpenSession] = {}
        self._settings: Settings | None = None
        self._asking = Asking()
        self._files = EditorFiles()
        self._terminals = EditorTerminals(self._show_terminal)

    def on_connect(self, conn: Any) -> None:
        self._editor = self._asking.editor = self._files.editor = conn
        self._terminals.editor = conn

    def observe(self, event: Any) -> None:
        """Every message on the editor's connection passes here (run_agent's observer)."""
        self._asking.observe(event)

    async def _client(self) -> TetherClient:
        if self._tether is None:
            try:
                self._tether = await TetherClient.connect(self._home)
                # a viewer: an owner stopped on purpose (`tether stop`) stays stopped
                self._tether.keep_owner_stopped = True
                self._asking.tether = self._tether
                self._files.tether = self._terminals.tether = self._tether
            except OwnerUnavailable as exc:
                raise error_for(exc) from None
        return self._tether

    async def _owner_settings(self) -> Settings:
        """What the owner's configuration lets an editor choose (asked once)."""
        if self._settings is None:
            client = await self._client()
            try:
                self._settings = Settings(await client.call("runtime.describe"))
            except RpcError as exc:
                raise error_for(exc) from None
        return self._settings

    async def close(self) -> None:
        self._files.close()
        self._terminals.close()
        for s in self._sessions.values():
            if s.follower is not None:
                s.follower.cancel()
            s.stream.close()
        if self._tether is not None:
            await self._tether.close()

    # -- handshake and sessions --------------------------------------------

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        self._files.capabilities(client_capabilities)
        self._terminals.capabilities(client_capabilities)
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                mcp_capabilities=McpCapabilities(http=True, sse=False),
                prompt_capabilities=PromptCapabilities(embedded_context=True),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities())),
            agent_info=Implementation(name="tether", title="tether", version=self._version))

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None,
                          **kwargs: Any) -> NewSessionResponse:
        client = await self._client()
        try:
            snap = await client.create_session(source="acp", cwd=cwd)
        except RpcError as exc:
            raise error_for(exc) from None
        await attach_mcp(client, snap["session_id"], mcp_servers)
        await self._open(snap["session_id"], cwd)
        settings = await self._owner_settings()
        return NewSessionResponse(session_id=snap["session_id"],
                                  config_options=settings.options(None),
                                  modes=settings.modes(None))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
                           **kwargs: Any) -> LoadSessionResponse:
        old = self._sessions.pop(session_id, None)
        if old is not None:
            await self._forget(old)
        s = await self._open(session_id, cwd, replay=True)
        s.sandbox = old.sandbox if old is not None else None
        await attach_mcp(await self._client(), session_id, mcp_servers)
        for prompt in (s.stream.snapshot or {}).get("approvals") or []:
            self._asking.ask(s.sid, s.cwd, prompt, s.calls)
        settings = await self._owner_settings()
        return LoadSessionResponse(config_options=settings.options(s.sandbox),
                                   modes=settings.modes(s.sandbox))

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None,
                            **kwargs: Any) -> ListSessionsResponse:
        client = await self._client()
        try:
            page = await client.list_sessions(limit=100, cursor=cursor)
        except RpcError as exc:
            raise error_for(exc) from None
        return session_page(page, cwd)

    async def _open(self, sid: str, cwd: str | None, *, replay: bool = False) -> OpenSession:
        """Follow a session's events from now on (after replaying its transcript)."""
        if sid in self._sessions:
            return self._sessions[sid]
        client = await self._client()
        stream = client.events(sid)
        stream.on_attach = partial(self._offer, sid)  # on every (re)subscription
        try:
            snap = await client.resilient(stream.open)
        except RpcError as exc:
            stream.close()
            raise error_for(exc) from None
        s = OpenSession(sid, snap["info"].get("cwd") or cwd, stream)
        self._sessions[sid] = s
        if replay:  # the transcript, then the context's fill and the cost
            usage = s.meter.on_snapshot(info := snap["info"])
            for update in [*transcript_updates(snap["messages"], s.cwd, info.get("running")),
                           *filter(None, [usage])]:
                await self._editor.session_update(session_id=sid, update=update)
        s.follower = asyncio.create_task(self._follow(s))
        return s

    async def _offer(self, sid: str) -> None:
        """What the editor executes for the session: its files, its terminals."""
        await self._files.offer(sid)
        await self._terminals.offer(sid)

    async def _show_terminal(self, sid: str, admission_id: Any, call: Any, tid: str) -> None:
        """Embed the editor's terminal ``tid`` in the card of the call it runs for."""
        s = self._sessions.get(sid)
        if s is not None and isinstance(call, str) and \
                (update := s.terminal(call_id(admission_id, call), tid)) is not None:
            await self._editor.session_update(session_id=sid, update=update)

    async def _forget(self, s: OpenSession) -> None:
        if s.follower is not None:
            s.follower.cancel()
        await self._asking.end_session(s.sid)
        s.stream.close()

    async def _session(self, sid: str) -> OpenSession:
        return self._sessions.get(sid) or await self._open(sid, None)

    # -- the event stream ----------------------------------------------------

    async def _follow(self, s: OpenSession) -> None:
        try:
            while True:
                event = await s.stream.get()
                if event is not None:
                    await self._on_event(s, event)
        except asyncio.CancelledError:
            raise
        except Exception:  # the owner stayed away: prompts fall back on receipts
            log.exception("following session %s stopped", s.sid)

    async def _on_event(self, s: OpenSession, event: dict[str, Any]) -> None:
        kind, p = event.get("type"), event.get("payload") or {}
        key = call_id(event.get("admission_id"), str(p.get("call_id")))
        if kind == "tool.start":
            s.calls[key] = (p.get("name", ""), p.get("arguments", ""))
            s.announced.add(key)  # before its update is made: see _show_terminal
        for update in event_updates(event, s.cwd, s.own_inputs, s.terminals):
            await self._editor.session_update(session_id=s.sid, update=update)
        if kind == "tool.complete":
            s.announced.discard(key)
            s.terminals.pop(key, None)
        if (usage := s.meter.on_event(event)) is not None:
            await self._editor.session_update(session_id=s.sid, update=usage)
        if (plan := s.plan.on_event(event)) is not None:
            await self._editor.session_update(session_id=s.sid, update=plan)
        if kind == "approval.requested":
            self._asking.ask(s.sid, s.cwd, {**p, "admission_id": event.get("admission_id")},
                             s.calls)
        elif kind == "approval.resolved":  # answered elsewhere, timed out or cancelled
            await self._asking.end(p.get("approval_id", ""))
        elif kind == "message.complete":
            turn = call_id(event.get("admission_id") or p.get("admission_id"), "")
            for key in s.end_calls(turn):  # calls its turn ended without
                await self._editor.session_update(session_id=s.sid, update=cut_off(key))
            if len(s.completed) > 64:  # other viewers' turns nobody here waits for
                s.completed.pop(next(iter(s.completed)))
            s.completed[p.get("admission_id", "")] = p
            s.arrived.set()

    # -- prompts ---------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        s = await self._session(session_id)
        client = await self._client()
        text, attachments = prompt_text(prompt)
        input_id = input_id_for(session_id, kwargs.get("messageId"))
        s.own_inputs.add(input_id)
        options: dict[str, Any] = {"sandbox": s.sandbox} if s.sandbox else {}
        s.submitting, s.cancel_wanted = True, False
        try:
            receipt = await client.resilient(lambda: client.submit(
                session_id, input_id, text or " ", attachments=attachments or None,
                **options))
        except RpcError as exc:
            raise error_for(exc) from None
        finally:
            s.submitting = False
        aid = receipt["admission_id"]
        s.running = aid
        if s.cancel_wanted and receipt["status"] != "terminal":
            await self._cancel_running(s)
        usage = None
        try:
            while aid not in s.completed and receipt["status"] != "terminal":
                s.arrived.clear()
                try:
                    await asyncio.wait_for(s.arrived.wait(), POLL_SECONDS)
                except TimeoutError:
                    receipt = await client.resilient(
                        lambda: client.receipt(session_id, admission_id=aid))
            if receipt["status"] != "terminal":
                receipt = await client.resilient(
                    lambda: client.receipt(session_id, admission_id=aid))
            usage = turn_usage((s.completed.get(aid) or {}).get("usage"))
        finally:
            s.running = None
            s.completed.pop(aid, None)
        return PromptResponse(stop_reason=_STOP.get(receipt.get("outcome") or "", "end_turn"),
                              usage=usage)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        s = self._sessions.get(session_id)
        if s is None:
            return
        if s.running is None:
            # the turn can start streaming before its receipt is back: cancel it then
            s.cancel_wanted = s.submitting
            return
        await self._cancel_running(s)

    async def _cancel_running(self, s: OpenSession) -> None:
        if s.running is None or self._tether is None:
            return
        try:
            await self._tether.call("prompt.cancel", session_id=s.sid,
                                    admission_id=s.running)
        except RpcError as exc:
            log.info("cancel of %s: %s", s.running, exc.detail)

    async def _choose_sandbox(self, session_id: str, value: Any) -> tuple[OpenSession, Settings]:
        settings = await self._owner_settings()
        chosen = settings.check_sandbox(value)
        s = await self._session(session_id)
        s.sandbox = None if chosen == settings.sandbox else chosen
        return s, settings

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool,
                                **kwargs: Any) -> SetSessionConfigOptionResponse:
        if config_id == SANDBOX:
            s, settings = await self._choose_sandbox(session_id, value)
            await self._editor.session_update(session_id=session_id, update=CurrentModeUpdate(
                session_update="current_mode_update",
                current_mode_id=s.sandbox or settings.sandbox))
        elif config_id == APPROVALS:
            settings = await self._owner_settings()
            settings.check_approvals(value)
            s = await self._session(session_id)
        else:
            raise RequestError(-32602, f"no config option {config_id!r} (tether has "
                                       f"{SANDBOX!r} and {APPROVALS!r})")
        return SetSessionConfigOptionResponse(config_options=settings.options(s.sandbox))

    async def set_session_mode(self, session_id: str, mode_id: str,
                               **kwargs: Any) -> SetSessionModeResponse:
        s, settings = await self._choose_sandbox(session_id, mode_id)
        await self._editor.session_update(session_id=session_id, update=ConfigOptionUpdate(
            session_update="config_option_update", config_options=settings.options(s.sandbox)))
        return SetSessionModeResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def cmd_acp(args: Any) -> int:
    """Serve ACP on stdin/stdout until the editor closes them."""
    from tether.rpc.home import resolve_home

    from ..library.exits import CONTEXT
    from ..library.version import installed_version as _version

    CONTEXT.home = home = resolve_home(args.home)
    # stdout is the protocol's: anything else goes to stderr (editors log it)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="tether acp: %(levelname)s %(message)s")
    agent = TetherAgent(home, _version())

    async def serve() -> None:
        try:
            await run_agent(agent,  # type: ignore[arg-type]  # structural, partial Agent
                            observers=[agent.observe])
        finally:
            await agent.close()

    asyncio.run(serve())
    return 0
