"""The approval.* method handlers, added to the owner's dispatcher (build_dispatcher's
``register``, wired in owner.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tether.rpc.dispatch import Dispatcher
from tether.rpc.models import approvals as m

from .service import ApprovalService

__all__ = ["approval_handlers"]


class Call(Protocol):
    """What these handlers read of a request's connection (transport.server.Call)."""

    transport: str


def approval_handlers(approvals: ApprovalService) -> Callable[[Dispatcher], None]:
    """What registers the approval.* handlers on a dispatcher."""
    return lambda d: _register(d, approvals)


def _register(d: Dispatcher, approvals: ApprovalService) -> None:
    @d.register("approval.respond")
    async def respond(p: m.ApprovalRespondParams, call: Call) -> dict[str, Any]:
        return await approvals.respond(p.session_id, p.approval_id, p.decision, p.reason,
                                       answered_by=call.transport)

    @d.register("approval.list")
    async def list_(p: m.ApprovalListParams, call: Call) -> dict[str, Any]:
        return {"approvals": await approvals.pending(p.session_id)}

    @d.register("approval.rules")
    async def rules(p: m.ApprovalRulesParams, call: Call) -> dict[str, Any]:
        return {"rules": await approvals.rules()}

    @d.register("approval.rule_remove")
    async def rule_remove(p: m.ApprovalRuleRemoveParams, call: Call) -> dict[str, Any]:
        return {"removed": await approvals.remove_rule(p.rule_id)}
