"""Wire models of tokens and cost: a session's sums, as session.info, snapshots and
session.list carry them (docs/long-sessions.md, "Tokens and cost").

Kept out of models.py so the models there can use it without a cycle; it
follows the same rules (strict, unknown keys rejected).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ContextFill", "SessionUsage"]


class SessionUsage(BaseModel):
    """A session's tokens, summed over every model request made for it (its turns,
    its compactions and the delegation children it started). ``cost_usd`` is null
    when any model used has no known price: unknown, never a guess."""

    model_config = ConfigDict(extra="forbid", strict=True)

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    requests: int = Field(description="model requests made")
    cost_usd: float | None
    by_model: dict[str, dict[str, int]] = Field(description=(
        "the same counters (and requests) per model name"))


class ContextFill(BaseModel):
    """How full the model's context window is after a turn: the tokens the session's
    next request starts from (``used``) of the model's window (``window``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    used: int = Field(description=(
        "the last model request's prompt tokens plus its answer's (reasoning left "
        "out), as the model server reported them; else tether's own count"))
    window: int = Field(description="the model's context window, in tokens")
    estimated: bool = Field(description=(
        "true when used is tether's count (the server reported no usage)"))
