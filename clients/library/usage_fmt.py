"""Showing tokens and cost: the `tether sessions` columns, `/cost` in the chat,
`tether status`. The owner computes every figure (rpc SessionUsage); this only
formats them, and says "unknown" for a cost the owner could not price."""

from __future__ import annotations

from typing import Any

__all__ = ["tokens", "cost", "cost_lines", "add_up", "top_level_usage"]

COUNTERS = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens",
            "reasoning_tokens", "requests")


def tokens(n: Any) -> str:
    """1234 → 1.2k, 3456789 → 3.5M."""
    n = int(n or 0)
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def cost(usage: dict[str, Any] | None) -> str:
    """$0.0123, "-" when nothing was used, "unknown" when a model has no price."""
    if not usage or not usage.get("total_tokens") and not usage.get("prompt_tokens"):
        return "-"
    usd = usage.get("cost_usd")
    if usd is None:
        return "unknown"
    return f"${usd:.4f}" if usd < 1 else f"${usd:.2f}"


def cost_lines(usage: dict[str, Any] | None) -> list[str]:
    """What `/cost` shows: totals, then one line per model."""
    if not usage or not usage.get("requests"):
        return ["no model request yet in this session"]
    lines = [f"tokens: {usage.get('prompt_tokens', 0)} prompt "
             f"({usage.get('cached_tokens', 0)} cached), "
             f"{usage.get('completion_tokens', 0)} completion "
             f"({usage.get('reasoning_tokens', 0)} reasoning), "
             f"{usage.get('requests', 0)} requests",
             f"cost: {cost(usage)}" + ("" if usage.get("cost_usd") is not None else
                                       " (a model has no price: set model.prices in "
                                       "config.yaml)")]
    for model, sums in sorted((usage.get("by_model") or {}).items()):
        lines.append(f"  {model}: {sums.get('prompt_tokens', 0)} prompt, "
                     f"{sums.get('completion_tokens', 0)} completion, "
                     f"{sums.get('requests', 0)} requests")
    return lines


def add_up(usages: list[dict[str, Any] | None]) -> dict[str, Any]:
    """Several sessions' totals summed (cost null if any is unknown)."""
    out: dict[str, Any] = {k: 0 for k in COUNTERS}
    total: float | None = 0.0
    for u in usages:
        if not u:
            continue
        for k in COUNTERS:
            out[k] += int(u.get(k) or 0)
        if u.get("requests"):
            c = u.get("cost_usd")
            total = None if c is None or total is None else total + float(c)
    out["cost_usd"] = None if total is None else round(total, 6)
    return out


async def top_level_usage(client: Any) -> list[dict[str, Any] | None]:
    """Each top-level session's totals (a session's include its delegation children's,
    so children are not counted again); an owner older than usage sends none."""
    out: list[dict[str, Any] | None] = []
    cursor = None
    while True:
        page = await client.list_sessions(limit=500, cursor=cursor)
        out += [s.get("usage") for s in page["sessions"] if not s.get("parent_session_id")]
        cursor = page.get("next_cursor")
        if not cursor:
            return out
