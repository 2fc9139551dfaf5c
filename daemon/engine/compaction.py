"""Compaction: older turns summarised by the model, stored as a record (SPEC §13).

A session's request is the system prompt, the latest summary (if any) and the
transcript after it. When that would pass the budget (budget.py) and
``model.compact`` is ``auto``, or on request (``/compact``, ``session.compact``),
the older turns are folded into a new summary and only the newest turns are
kept whole. Everything here happens before anything is written: the summary is
asked for chunk by chunk (each request within the budget, the summary so far
carried along), and only when the whole summary is back is the record written,
in one unit with its ``session.compacted`` event and its usage. A crash or a
failure before that leaves no trace but the tokens spent; no half-summary is
ever used. The transcript itself is never changed.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Any

from tether.store.conn import Conn
from tether.store.tables import compactions, messages, sessions

from ..ledger.journal import Journal, Tx
from ..model.budget import Budget, count_text, cut_text
from ..model.provider import Provider, ProviderError
from ..model.usage import add
from .transcript import SUMMARY_HEADER

__all__ = ["COMPACT_PROMPT", "Compactor", "CompactionFailed", "Target", "split_point",
           "render"]

log = logging.getLogger("tether.compaction")

#: the fixed instruction of every compaction request (docs/long-sessions.md)
COMPACT_PROMPT = (
    "You compact the history of a long-running agent session so the agent can go on "
    "working without the full transcript. Fold the new part of the conversation into "
    "the summary so far and answer with the updated summary only, as plain text in "
    "short sections: the user's goals and standing instructions; decisions made and "
    "why; the state of the work (files changed, commands run and what they showed, "
    "results of tool calls and of delegated tasks); open questions and next steps. "
    "Keep names, paths, numbers, identifiers and errors exactly. Leave out pleasantries "
    "and anything later superseded. Never invent anything that is not in the text. "
    "Use at most {words} words.")
#: share of the budget the newest turns kept whole may take after a compaction
KEEP_SHARE = 0.4
#: share of the budget a summary may take
SUMMARY_SHARE = 0.2


class CompactionFailed(Exception):
    """The model could not summarise (its error, or an empty answer)."""


@dataclass(frozen=True)
class Target:
    """Who asks: the session, the model settings, and the admission (None: manual)."""

    session_id: str
    model: str
    reasoning: str | None
    admission_id: str | None
    focus: str | None
    kind: str  # auto | manual


def _turn_starts(rows: list[dict[str, Any]]) -> list[int]:
    """Positions (in ``rows``) where a turn begins: a user message of a new admission."""
    out = []
    for i, r in enumerate(rows):
        if r["role"] == "user" and (i == 0 or r.get("admission_id") != rows[i - 1].get(
                "admission_id") or r.get("admission_id") is None):
            out.append(i)
    return out


def split_point(rows: list[dict[str, Any]], keep_tokens: int, tokenizer: str) -> int:
    """How many of ``rows`` to summarise: all before the earliest turn start from which
    the rest fits ``keep_tokens`` (the newest turn is always kept); 0: nothing to do."""
    starts = _turn_starts(rows)
    if len(starts) < 2 and not (starts and starts[0] > 0):
        return 0
    sizes = [count_text(r.get("content"), tokenizer) + 4 for r in rows]
    best = starts[-1]
    for s in reversed(starts[:-1]):
        if sum(sizes[s:]) > keep_tokens:
            break
        best = s
    return best


def render(row: dict[str, Any], cap_chars: int) -> str:
    """One transcript message as compaction input, its content cut to ``cap_chars``."""
    content = cut_text(row.get("content") or "", cap_chars)
    if row["role"] == "tool":
        return f"[result of tool {row.get('name') or ''}]\n{content}"
    text = f"{row['role']}: {content}"
    for call in row.get("tool_calls") or ():
        fn = call.get("function") or {}
        text += f"\n[calls tool {fn.get('name')} with {cut_text(str(fn.get('arguments')), 2000)}]"
    return text


class Compactor:
    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    async def compact(self, target: Target, provider: Provider, budget: Budget,
                      journal: Journal | None = None) -> dict[str, Any] | None:
        """Summarise what the latest record does not cover, but the newest turns; the
        record written (None: nothing old enough to summarise). CompactionFailed if
        the model could not; nothing is written then."""
        sid = target.session_id

        def read(c: Conn) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
            last = compactions.latest(c, sid)
            start = last["end_index"] if last else 0
            return last, messages.list_for(c, sid, start, with_index=True)

        previous, rows = await self._journal.db.read(read)
        tokenizer = budget.tokenizer
        # asked for by a person: everything but the newest turn; else keep what fits
        keep = 0 if target.kind == "manual" else int(budget.limit * KEEP_SHARE)
        cut = split_point(rows, keep, tokenizer)
        if cut == 0:
            return None
        covered = rows[:cut]
        before = self._request_tokens(previous, rows, tokenizer)
        summary, usage, calls = await self._summarise(target, provider, budget, previous,
                                                      covered)
        first = previous["first_index"] if previous else covered[0]["index"]
        record = {"compaction_id": "cmp_" + secrets.token_hex(8), "session_id": sid,
                  "first_index": first, "end_index": covered[-1]["index"] + 1,
                  "summary": summary, "model": target.model, "tokens_before": before,
                  "tokens_after": self._request_tokens({"summary": summary}, rows[cut:],
                                                       tokenizer),
                  "kind": target.kind, "focus": target.focus, "usage": usage}

        def unit(tx: Tx) -> dict[str, Any]:
            record["created_at"] = tx.now
            compactions.insert(tx.conn, record)
            sessions.add_usage(tx.conn, sid, target.model, usage, calls)
            tx.event(sid, "session.compacted",
                     {k: record[k] for k in ("compaction_id", "first_index", "end_index",
                                             "summary", "model", "tokens_before",
                                             "tokens_after", "kind", "focus")},
                     target.admission_id)
            return record

        return await (journal or self._journal).write(unit)

    @staticmethod
    def _request_tokens(previous: dict[str, Any] | None, rows: list[dict[str, Any]],
                        tokenizer: str) -> int:
        n = sum(count_text(r.get("content"), tokenizer) + 4 for r in rows)
        if previous:
            n += count_text(SUMMARY_HEADER + previous["summary"], tokenizer) + 4
        return n

    async def _summarise(self, target: Target, provider: Provider, budget: Budget,
                         previous: dict[str, Any] | None, covered: list[dict[str, Any]],
                         ) -> tuple[str, dict[str, int], int]:
        tokenizer = budget.tokenizer
        summary_tokens = max(64, int(budget.limit * SUMMARY_SHARE))
        prompt = COMPACT_PROMPT.format(words=max(40, summary_tokens * 3 // 4))
        if target.focus:
            prompt += f"\nThe user asks the summary to keep in particular: {target.focus}"
        # each request: the prompt, the summary so far (at most summary_tokens), a chunk
        room = budget.limit - count_text(prompt, tokenizer) - summary_tokens - 64
        chunk_tokens = max(64, room)
        cap_chars = max(400, chunk_tokens * 3)  # one message never fills a chunk alone
        chunks: list[list[str]] = [[]]
        used = 0
        for row in covered:
            piece = render(row, cap_chars)
            size = count_text(piece, tokenizer) + 2
            if chunks[-1] and used + size > chunk_tokens:
                chunks.append([])
                used = 0
            chunks[-1].append(piece)
            used += size
        summary = previous["summary"] if previous else ""
        usage: dict[str, int] = {}
        calls = 0
        for chunk in chunks:
            body = "\n\n".join(chunk)
            ask = (f"Summary so far:\n{summary or '(none yet)'}\n\n"
                   f"New part of the conversation:\n{body}")
            try:
                done = await provider.complete(
                    messages=[{"role": "system", "content": prompt},
                              {"role": "user", "content": ask}],
                    tools=None, model=target.model, reasoning=target.reasoning)
            except ProviderError as exc:
                raise CompactionFailed(f"{exc.reason}: {exc.detail}") from None
            calls += 1
            add(usage, done.usage)
            text = (done.text or "").strip()
            if not text:
                raise CompactionFailed("the model answered the compaction request with "
                                       "nothing")
            # the model is not trusted to keep to its length: a summary never grows
            # past its share of the budget
            summary = cut_text(text, summary_tokens * 3) if count_text(
                text, tokenizer) > summary_tokens else text
        return summary, usage, calls
