"""``tether chat``: one finite turn, or an interactive session on a terminal (SPEC §8).

Mode rules, decided before anything is sent:

- **finite**: ``-Q``, ``--oneshot``, ``--json``, stdout not a terminal, or stdin
  not a terminal. The prompt is submitted with ``finite: true``: the CLI will
  not be there after the turn, so the owner runs delegations inline and the
  answer includes every child's result. The CLI prints the final answer (only
  the answer with ``-Q``/``--oneshot``) and exits when the turn is terminal.
- **interactive**: stdin and stdout are both terminals (a ``-q`` query just
  seeds the first prompt). Prompts are submitted with ``finite: false``; the
  CLI stays subscribed, so background delegation results that come back as a
  new turn are shown when they arrive.

Both use the resilient submit: the input id is chosen once, and a lost
connection or owner restart leads to a reconnect and a resubmission of the same
input id, never to a second turn or a doubled answer.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from tether.rpc.errors import RpcError
from tether.rpc.protocol import MAX_ID_CHARS

from ..library.client import TetherClient, new_input_id
from ..library.exits import CONTEXT, EXIT_OK, receipt_exit, report
from ..library.remote import connect_owner
from .plan import ChatPlan, plan_chat

__all__ = ["ChatPlan", "plan_chat", "run_chat"]

TITLE_CHARS = 80

def _session_request_id(input_id: str) -> str:
    """The session's request_id for ``--input-id``: ``cli-`` and the id, or a digest
    of an id too long for that to fit the protocol's 200 characters."""
    if len(input_id) <= MAX_ID_CHARS - 4:
        return "cli-" + input_id
    import hashlib

    return "cli-sha256-" + hashlib.sha256(input_id.encode()).hexdigest()


async def _session(client: TetherClient, plan: ChatPlan) -> str:
    if plan.resume or plan.last:
        from ..library.remote import resolve_session

        return await resolve_session(client, plan.resume)
    # With --input-id the session is derived from it too, so re-running the same
    # command after a crash of the CLI finds the same session and admission.
    request_id = _session_request_id(plan.input_id) if plan.input_id else (
        "cli-" + os.urandom(9).hex())
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    title = None
    if plan.query:
        title = " ".join(plan.query.split())[:TITLE_CHARS] or None
    snap = await client.resilient(lambda: client.create_session(
        request_id=request_id, source="cli", cwd=cwd, title=title, **plan.options))
    return snap["session_id"]


async def run_chat(home: Any, plan: ChatPlan, *, blocking: bool = False) -> int:
    """The chat ``plan`` says; ``blocking``: a finite one on ``BlockingClient``, run by
    ``run_sync`` (library/blocking.py), as ``tether chat`` runs it on the home's owner."""
    client = await connect_owner(home, blocking=blocking)
    try:
        if plan.interactive:
            from .interactive import interactive

            if CONTEXT.remote is not None:  # no owner made the home: the history lives there
                Path(home).mkdir(mode=0o700, parents=True, exist_ok=True)
            # a new session is made with the first accepted prompt (none left empty),
            # unless --input-id names it (a re-run must find the same session)
            sid = await _session(client, plan) \
                if plan.resume or plan.last or plan.input_id else None
            CONTEXT.session_id = sid
            return await interactive(client, home, sid, plan)
        session_id = await _session(client, plan)
        CONTEXT.session_id = session_id
        try:
            return await _finite(client, session_id, plan)
        except RpcError as exc:
            if exc.reason == "invalid_params" and not (plan.resume or plan.last
                                                       or plan.input_id):
                # the prompt was refused: the session made for it stays empty, so it goes
                CONTEXT.session_id = None
                await _forget(client, session_id)
            raise
    finally:
        await client.close()


async def _forget(client: TetherClient, session_id: str) -> None:
    try:
        await client.call("session.delete", session_id=session_id)
    except Exception:  # noqa: BLE001 - `tether sessions prune` removes it at worst
        pass


# -- finite -------------------------------------------------------------------


def unattended_note(event: dict[str, Any]) -> str | None:
    """The line a finite chat prints for a tool call refused because the turn is
    unattended, or None."""
    if event.get("type") != "tool.complete":
        return None
    payload = event.get("payload") or {}
    try:
        result = json.loads(payload.get("result") or "{}")
    except (ValueError, TypeError):
        return None
    if not isinstance(result, dict) or not result.get("denied"):
        return None
    error = str(result.get("error") or "")
    if "unattended" not in error:
        return None
    return (f"[tether] {payload.get('name', 'a tool')} was denied: this chat is finite, so "
            "nobody can answer an approval prompt (approvals.unattended: deny); run it "
            "interactively, or allow it with an approvals rule")


def _json_line(obj: Any) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(obj).decode() + "\n")
    sys.stdout.flush()


async def _finite(client: TetherClient, session_id: str, plan: ChatPlan) -> int:
    assert plan.query is not None
    input_id = plan.input_id or new_input_id()
    CONTEXT.input_id = input_id
    renderer = None
    if plan.json:
        on_event: Any = _json_line
    elif plan.stream_to_terminal:
        from .render import Renderer, use_color

        # every turn shown here is this command's: no "new turn" headers
        renderer = Renderer(sys.stdout, color=use_color(sys.stdout), mine=None, headers=False)
        on_event = renderer.event
    else:
        def on_event(event: Any) -> None:  # only what the owner refused unattended
            if (note := unattended_note(event)) is not None:
                print(note, file=sys.stderr)
        # a new session's id, so a user can continue it; a resumed one they named
        if not plan.quiet and not (plan.resume or plan.last):
            print(f"[tether] session {session_id} (continue it with "
                  f"`tether chat --resume {session_id}`)", file=sys.stderr)
    receipt = await client.submit_and_wait(session_id, plan.query, input_id=input_id,
                                           finite=True, on_event=on_event, **plan.options)
    failure = receipt_exit(receipt)
    if plan.json:
        _json_line(receipt)
    elif failure is None:
        text = (receipt.get("result") or {}).get("text") or ""
        if renderer is None:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            sys.stdout.flush()
        elif receipt["admission_id"] not in renderer.completed:
            renderer.answer(text)
    if failure is not None:
        return report(failure)
    return EXIT_OK
