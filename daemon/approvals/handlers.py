"""The approval.* method handlers, registered on the owner's dispatcher by handlers.py."""

from __future__ import annotations

from typing import Any

from tether.rpc import models_approvals as m
from tether.rpc.dispatch import Dispatcher

from ..server import Call
from .service import ApprovalService

__all__ = ["register"]


def register(d: Dispatcher, approvals: ApprovalService) -> None:
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
