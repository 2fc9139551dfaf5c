"""The interactive chat after ``tether stop``: it stays open and waits for the next
owner instead of ending.

A viewer never restarts an owner stopped on purpose (docs/decisions.md), so the
chat does not start one by itself: it says the owner stopped and watches the
home for a new one — started by any ``tether`` command, ``tether serve``, or the
chat's own next prompt (a prompt the person sends is work to hand over, so it
may start one) — and follows its session there again. Ctrl-D leaves as always.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..library.exits import CliError, from_exception

__all__ = ["wait_for_next_owner", "POLL_SECONDS"]

#: how often the home is looked at for a new owner while the chat waits
POLL_SECONDS = 0.5


def wait_for_next_owner(chat: Any, err: CliError) -> None:
    """Start waiting (once) after the chat's owner was stopped on purpose."""
    if chat.waiting_owner is not None:
        return
    chat.running, chat.pending = None, []
    chat.renderer.progress(f"{err.detail}; this chat waits for the next owner: any "
                           "`tether` command starts one, and so does your next prompt "
                           "(Ctrl-D leaves)")
    chat.waiting_owner = asyncio.ensure_future(_watch(chat))


async def _watch(chat: Any) -> None:
    from ..library.discovery import live_descriptor

    while not chat.leaving:
        try:
            desc = live_descriptor(chat.home)
        except Exception:  # noqa: BLE001 - unreadable for now: look again
            desc = None
        if desc is not None:
            try:
                if chat.session_id is not None:
                    await chat.attach(chat.session_id, transcript=False)
                else:
                    await chat.client.reconnect()
            except Exception as exc:  # noqa: BLE001 - it went again: keep waiting
                if from_exception(exc).reason != "owner_stopped":
                    chat.renderer.progress(f"not yet: {from_exception(exc).detail}")
            else:
                chat.renderer.progress(f"the chat follows the new owner (pid {desc.get('pid')})")
                chat.waiting_owner = None
                return
        await asyncio.sleep(POLL_SECONDS)


async def start_owner_for(chat: Any) -> None:
    """A prompt sent while waiting: start the next owner for it (and follow it)."""
    task = chat.waiting_owner
    chat.client.keep_owner_stopped = False  # the person's own prompt: work to hand over
    try:
        await chat.client.reconnect()
    finally:
        chat.client.keep_owner_stopped = True
    if task is not None and not task.done():
        task.cancel()
    chat.waiting_owner = None
    if chat.session_id is not None:
        await chat.attach(chat.session_id, transcript=False)
