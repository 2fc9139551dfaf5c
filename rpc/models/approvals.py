"""Wire models of approvals: the prompt a viewer answers, and the approval.* methods."""

from __future__ import annotations

from typing import Literal

from .core import ApprovalPrompt, Id, Model, Timestamp

__all__ = ["ApprovalRespondParams", "ApprovalRespondResult", "ApprovalListParams",
           "ApprovalListResult", "ApprovalRule", "ApprovalRulesParams", "ApprovalRulesResult",
           "ApprovalRuleRemoveParams", "ApprovalRuleRemoveResult", "Decision"]

Decision = Literal["once", "session", "always", "deny"]


class ApprovalRespondParams(Model):
    session_id: Id
    approval_id: Id
    decision: Decision
    reason: str | None = None


class ApprovalRespondResult(Model):
    """``resolved``: this answer decided; ``already_resolved``: an earlier answer, the
    timeout or the turn's end did (``approval`` says how)."""

    status: Literal["resolved", "already_resolved"]
    approval: ApprovalPrompt


class ApprovalListParams(Model):
    session_id: Id | None = None  # omitted: pending prompts of every session


class ApprovalListResult(Model):
    approvals: list[ApprovalPrompt]


class ApprovalRule(Model):
    rule_id: str | None  # null for config rules (edit config.yaml to change them)
    kind: Literal["command", "file"]
    pattern: str
    effect: Literal["allow", "deny"]
    source: Literal["config", "session", "always"]
    session_id: str | None
    created_at: Timestamp | None


class ApprovalRulesParams(Model):
    pass


class ApprovalRulesResult(Model):
    rules: list[ApprovalRule]


class ApprovalRuleRemoveParams(Model):
    rule_id: Id


class ApprovalRuleRemoveResult(Model):
    removed: bool
