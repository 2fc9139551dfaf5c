"""The context window's fill and the session's cost as ACP ``usage_update``.

The owner reports them (docs/long-sessions.md): each turn that asked a model ends with
``message.complete`` carrying ``context`` (the tokens the session's next request
starts from, of the model's window) and then the ``session.info`` carrying the
session's totals (``usage.cost_usd``, null when a model's price is unknown); a
compaction (``session.compacted``) lowers the fill to its estimate; a snapshot
(``session/load``) has both in ``info``. ``Meter`` keeps the latest of each for one
open session and says when the editor should get a new ``usage_update``.
"""

from __future__ import annotations

from typing import Any

from acp.schema import Cost, UsageUpdate

__all__ = ["Meter"]


class Meter:
    """One session's latest context fill and cost, as the editor last heard them."""

    def __init__(self) -> None:
        self.context: dict[str, Any] | None = None
        self.cost: float | None = None

    def update(self) -> UsageUpdate | None:
        """The usage_update of what is known now (None: no fill known yet)."""
        ctx = self.context
        if not ctx or not isinstance(ctx.get("used"), int) \
                or not isinstance(ctx.get("window"), int):
            return None
        cost = Cost(amount=self.cost, currency="USD") if self.cost is not None else None
        return UsageUpdate(session_update="usage_update", used=max(ctx["used"], 0),
                           size=max(ctx["window"], 0), cost=cost)

    def on_event(self, event: dict[str, Any]) -> UsageUpdate | None:
        """The update a live event calls for, if any: after a turn (the session.info
        with its totals) and after a compaction."""
        kind, p = event.get("type"), event.get("payload") or {}
        if kind == "message.complete" and isinstance(p.get("context"), dict):
            self.context = p["context"]  # sent on with the totals that follow it
        elif kind == "session.info" and isinstance(p.get("usage"), dict):
            self.cost = p["usage"].get("cost_usd")
            return self.update()
        elif kind == "session.compacted" and self.context is not None \
                and isinstance(p.get("tokens_after"), int):
            self.context = {**self.context, "used": p["tokens_after"], "estimated": True}
            return self.update()
        return None

    def on_snapshot(self, info: dict[str, Any]) -> UsageUpdate | None:
        """The update of a session just opened (session/load)."""
        if isinstance(info.get("context"), dict):
            self.context = info["context"]
        if isinstance(info.get("usage"), dict):
            self.cost = info["usage"].get("cost_usd")
        return self.update()
