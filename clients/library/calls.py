"""The typed calls of a tether client: one thin wrapper of ``call`` per method
(docs/protocol.md), shared by ``TetherClient`` (client.py) and the blocking client of
the one-shot commands (blocking.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

__all__ = ["Calls"]


class Calls:
    """``call`` is the subclass's; the rest are named calls on top of it."""

    async def call(self, method: str, /, **params: Any) -> Any:
        raise NotImplementedError

    async def describe(self) -> dict[str, Any]:
        return await self.call("runtime.describe")

    async def ping(self) -> dict[str, Any]:
        return await self.call("ping")

    async def shutdown(self) -> dict[str, Any]:
        """Ask the owner to drain and exit (Unix socket only)."""
        return await self.call("runtime.shutdown")

    async def create_token(self, label: str | None = None) -> dict[str, Any]:
        return await self.call("token.create", label=label)

    async def create_session(self, *, request_id: str | None = None, source: str | None = None,
                             title: str | None = None, cwd: str | None = None,
                             **options: Any) -> dict[str, Any]:
        """session.create; ``options`` are turn options used as the session's defaults."""
        return await self.call("session.create", request_id=request_id, source=source,
                               title=title, cwd=cwd, **options)

    async def resume(self, session_id: str, after_seq: int | None = None) -> dict[str, Any]:
        return await self.call("session.resume", session_id=session_id, after_seq=after_seq)

    async def list_sessions(self, limit: int | None = None,
                            cursor: str | None = None) -> dict[str, Any]:
        return await self.call("session.list", limit=limit, cursor=cursor)

    async def events_since(self, session_id: str, after_seq: int = 0,
                           limit: int | None = None) -> dict[str, Any]:
        return await self.call("session.events.since", session_id=session_id,
                               after_seq=after_seq, limit=limit)

    async def all_events_since(self, session_id: str, after_seq: int = 0) -> AsyncIterator[dict]:
        """Every stored event after ``after_seq``, paging session.events.since."""
        while True:
            page = await self.events_since(session_id, after_seq)
            for event in page["events"]:
                yield event
            if not page["events"] or page["events"][-1]["seq"] >= page["last_seq"]:
                return
            after_seq = page["events"][-1]["seq"]

    async def detach(self, session_id: str) -> dict[str, Any]:
        return await self.call("session.detach", session_id=session_id)

    async def interrupt(self, session_id: str) -> dict[str, Any]:
        return await self.call("session.interrupt", session_id=session_id)

    async def submit(self, session_id: str, input_id: str, text: str, *, finite: bool = False,
                     attachments: list[dict[str, Any]] | None = None,
                     **options: Any) -> dict[str, Any]:
        """prompt.submit once (no retry); ``options`` are per-turn options."""
        return await self.call("prompt.submit", session_id=session_id, input_id=input_id,
                               text=text, finite=finite, attachments=attachments, **options)

    async def receipt(self, session_id: str, *, admission_id: str | None = None,
                      input_id: str | None = None) -> dict[str, Any]:
        return await self.call("prompt.receipt", session_id=session_id,
                               admission_id=admission_id, input_id=input_id)

    async def cancel(self, session_id: str, admission_id: str) -> dict[str, Any]:
        return await self.call("prompt.cancel", session_id=session_id, admission_id=admission_id)

    async def resolve_unknown(self, session_id: str, admission_id: str) -> dict[str, Any]:
        return await self.call("prompt.resolve_unknown", session_id=session_id,
                               admission_id=admission_id)
