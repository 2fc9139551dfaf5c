"""Showing a session on a terminal: streamed answers, progress lines, transcripts.

``Renderer`` turns the owner's events (docs/protocol.md §5) into text: answer
deltas are written as they arrive (with ``markdown``, the default on a terminal with
colour, a block at a time, rendered: clients/markdown.py); tool, helper (subagent)
and delegation progress become dim lines prefixed with ``·``; a turn this viewer
did not start (background delegation results, another client's prompt) gets a
header line. It only writes; it never reads or talks to the owner, so the chat,
attach and finite-with-a-terminal paths share it.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any, TextIO

from tether.rpc.previews import preview

__all__ = ["Renderer", "use_color", "shorten", "format_time", "outcome_line"]

_DIM = "\x1b[2m"
_BOLD = "\x1b[1m"
_RESET = "\x1b[0m"
_GREEN, _RED, _CYAN = "\x1b[32m", "\x1b[31m", "\x1b[36m"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: how the owner opens the message that delivers background delegation results
_RESULTS_MARKER = "[delegation results]"


def use_color(stream: TextIO) -> bool:
    """ANSI styling only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def shorten(text: Any, limit: int = 80) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_time(ts: Any) -> str:
    if not isinstance(ts, int | float):
        return "?"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def outcome_line(outcome: Any, error: Any = None) -> str | None:
    """How a turn that did not complete ended (None for a completed one)."""
    if not outcome or outcome == "completed":
        return None
    return f"turn {outcome}" + (f": {shorten(error, 200)}" if error else "")


class Renderer:
    """Writes one session's events to ``out``.

    ``mine`` is the set of admission ids this viewer submitted (None: a pure
    viewer, for whom every turn gets a header). ``headers=False`` shows turns
    without header lines (a finite chat: every turn on screen is its own).
    ``markdown`` (default: ``color``) renders answers as markdown.
    """

    def __init__(self, out: TextIO, *, color: bool, mine: set[str] | None = None,
                 headers: bool = True, markdown: bool | None = None) -> None:
        self.out = out
        self.color = color
        self.markdown = color if markdown is None else markdown
        self._md: Any = None  # markdown.MarkdownStream of the answer being streamed
        self.mine = mine
        self.headers = headers
        self.completed: set[str] = set()  # admissions whose message.complete we showed
        self.at_line_start = True
        self._started: set[str] = set()  # admissions whose message.start we saw
        self._streamed: set[str] = set()  # admissions whose answer we printed from deltas
        self._held: dict[str, list[str]] = {}  # deltas of turns we joined midway
        self._delivered = 0  # delegation results delivered but not yet started as a turn
        self.outstanding: set[str] = set()  # background delegations dispatched, not complete

    # -- low level -----------------------------------------------------------

    def write(self, text: str) -> None:
        """Write ``text`` after what is held of a streamed answer."""
        self.end_answer()
        self._put(text)

    def _put(self, text: str) -> None:
        if not text:
            return
        self.out.write(text)
        self.out.flush()
        self.at_line_start = text.endswith("\n")

    def newline(self) -> None:
        self.end_answer()
        if not self.at_line_start:
            self._put("\n")

    def answer(self, text: str) -> None:
        """A whole answer, on lines of its own."""
        self.newline()
        if self.markdown and text.strip():
            from .markdown import render_markdown

            self._put(render_markdown(text) + "\n")
        else:
            self._put(text)
            self.newline()

    def _stream(self, text: str) -> None:
        """A delta of an answer: written now, or (markdown) once its block is complete."""
        if not self.markdown:
            self._put(text)
            return
        if self._md is None:
            from .markdown import MarkdownStream

            self._md = MarkdownStream()
        self._put(self._md.feed(text))

    def end_answer(self) -> None:
        """Write what is held of the answer being streamed (markdown), rendered."""
        if self._md is not None:
            md, self._md = self._md, None
            self._put(md.finish())

    @property
    def streaming(self) -> str:
        """The text of the answer received but not written yet ("" if none)."""
        return self._md.pending if self._md is not None else ""

    def style(self, text: str, code: str) -> str:
        return f"{code}{text}{_RESET}" if self.color else text

    def progress(self, line: str) -> None:
        self.newline()
        text = f"  · {line}"
        if self.markdown:  # a terminal: wrapped at words, continued under the text
            import shutil
            import textwrap

            width = max(40, shutil.get_terminal_size().columns - 1)
            text = "\n".join(textwrap.wrap(text, width, subsequent_indent="    ",
                                            break_on_hyphens=False) or [text])
        self.write(self.style(text, _DIM) + "\n")

    def note(self, line: str) -> None:
        """A dim line without the progress prefix (banners, hints)."""
        self.newline()
        self.write(self.style(line, _DIM) + "\n")

    def header(self, line: str) -> None:
        self.newline()
        self.write(self.style(f"── {line} ──", _BOLD) + "\n")

    # -- events --------------------------------------------------------------

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        payload = event.get("payload") or {}
        aid = event.get("admission_id") or payload.get("admission_id")
        handler = getattr(self, "_on_" + str(kind).replace(".", "_"), None)
        if handler is not None:
            handler(payload, aid)

    def _on_message_start(self, payload: dict[str, Any], aid: str | None) -> None:
        if aid is None:
            return
        self._started.add(aid)
        if not self.headers:
            return
        if self.mine is None or aid not in self.mine:
            text = payload.get("text")
            results = isinstance(text, str) and text.startswith(_RESULTS_MARKER)
            if self._delivered or results:
                self._delivered = max(0, self._delivered - 1)
                self.header("background results arrived: new turn")
            elif self.mine is None:
                self.header(f"turn {aid}")
            else:
                self.header("new turn from another client")
            if isinstance(text, str) and text and not results:
                # what was asked (owners from before message.start carried it send none)
                more = " …" if payload.get("text_truncated") else ""
                self.write(self.style("› ", _BOLD) + text.rstrip("\n") + more + "\n")

    def _on_message_delta(self, payload: dict[str, Any], aid: str | None) -> None:
        text = payload.get("text") or ""
        if aid is not None and aid not in self._started:
            # we joined this turn midway: its beginning is not ours to show, so keep
            # the tail and print the whole answer from message.complete instead
            self._held.setdefault(aid, []).append(text)
            return
        if aid is not None:
            self._streamed.add(aid)
        self._stream(text)

    def _on_tool_start(self, payload: dict[str, Any], aid: str | None) -> None:
        name = payload.get("name", "?")
        detail = ""
        try:
            args = json.loads(payload.get("arguments") or "{}")
        except (ValueError, TypeError):  # not JSON, or not text
            args = None
        if isinstance(args, dict) and isinstance(args.get("tasks"), list):
            detail = f" ({len(args['tasks'])} tasks)"
        elif isinstance(args, dict) and args.get("goal"):
            detail = f": {shorten(args['goal'], 60)}"
        elif payload.get("subject"):  # the command or path a tool acts on
            detail = f": {shorten(payload['subject'], 100)}"
        self.progress(f"tool {name}{detail}")

    def _on_tool_complete(self, payload: dict[str, Any], aid: str | None) -> None:
        if payload.get("error"):
            self.progress(f"tool {payload.get('name', '?')} failed: {shorten(payload['error'])}")
        elif payload.get("summary"):
            self.progress(f"  → {shorten(payload['summary'], 160)}")
        if isinstance(payload.get("preview"), str) and not payload.get("error"):
            self.preview(payload["preview"])

    def preview(self, text: str) -> None:
        """A tool's preview under its summary: a diff (coloured +/-) or output lines."""
        diff = text.startswith("--- ")
        for line in text.split("\n"):
            if diff and line.startswith(("---", "+++")):
                continue  # the file is named in the summary
            style = _DIM
            if diff and line.startswith("+"):
                style = _GREEN
            elif diff and line.startswith("-"):
                style = _RED
            elif diff and line.startswith("@@"):
                style = _CYAN
            # a command's output may hold escape sequences: shown, never obeyed
            line = _CONTROL.sub("?", line.replace("\t", "    "))
            self.write("      " + self.style(line, style) + "\n")

    def _on_approval_requested(self, payload: dict[str, Any], aid: str | None) -> None:
        verb = "run" if payload.get("kind") == "command" else "write"
        self.progress(f"approval {payload.get('approval_id')} needed to {verb}: "
                      f"{shorten(payload.get('subject'), 100)}")

    def _on_approval_resolved(self, payload: dict[str, Any], aid: str | None) -> None:
        how = payload.get("decision") or payload.get("cause")
        self.progress(f"approval {payload.get('approval_id')} {payload.get('status')} ({how})"
                      + (f": {shorten(payload['reason'], 100)}" if payload.get("reason")
                         else ""))

    def _on_process_complete(self, payload: dict[str, Any], aid: str | None) -> None:
        self._delivered += 1
        state = payload.get("state")
        what = f"exited {payload.get('exit_code')}" if state == "exited" else state
        self.progress(f"background process {payload.get('process_id')} "
                      f"`{shorten(payload.get('command'), 60)}` {what}")

    def _on_subagent_start(self, payload: dict[str, Any], aid: str | None) -> None:
        index = payload.get("task_index")
        number = index + 1 if isinstance(index, int) else "?"
        self.progress(f"helper {number} started: {shorten(payload.get('goal'), 70)}")

    def _on_subagent_complete(self, payload: dict[str, Any], aid: str | None) -> None:
        index = payload.get("task_index")
        number = index + 1 if isinstance(index, int) else "?"
        self.progress(f"helper {number} {payload.get('status', 'finished')}: "
                      f"{shorten(payload.get('summary'), 70)}")

    def _on_delegation_dispatched(self, payload: dict[str, Any], aid: str | None) -> None:
        did = payload.get("delegation_id", "?")
        self.outstanding.add(did)
        tasks = payload.get("tasks")
        count = f"{len(tasks)} task{'s' if len(tasks) != 1 else ''}" \
            if isinstance(tasks, list) else "tasks"
        self.progress(f"delegation {did} runs in the background ({count}); "
                      "its results will arrive as a new turn")

    def _on_delegation_complete(self, payload: dict[str, Any], aid: str | None) -> None:
        did = payload.get("delegation_id", "?")
        self.outstanding.discard(did)
        self._delivered += 1
        self.progress(f"delegation {did} {payload.get('state', 'finished')}")

    def _on_message_complete(self, payload: dict[str, Any], aid: str | None) -> None:
        text = payload.get("text") or ""
        if aid is not None and aid not in self._streamed and text:
            self.answer(text)
        self._held.pop(aid or "", None)
        if aid is not None:
            self.completed.add(aid)
        self.newline()
        if (line := outcome_line(payload.get("outcome"), payload.get("error"))) is not None:
            self.progress(line)

    def _on_model_retry(self, payload: dict[str, Any], aid: str | None) -> None:
        delay = payload.get("delay_seconds")
        wait = f" in {delay:.0f} s" if isinstance(delay, int | float) and delay >= 1 else ""
        self.progress(f"retrying {payload.get('attempt', '?')}/{payload.get('attempts', '?')}"
                      f"{wait}: {shorten(payload.get('detail'), 160)}")

    def _on_session_replay_gap(self, payload: dict[str, Any], aid: str | None) -> None:
        pass  # the stream catches up by itself; nothing for a human here

    # -- transcripts ---------------------------------------------------------

    def transcript(self, messages: list[dict[str, Any]],
                   receipts: dict[str, dict[str, Any]] | None = None) -> None:
        """Print a stored transcript (session.resume's ``messages``); a turn with a
        receipt in ``receipts`` (by admission id) that did not complete is followed by
        how it ended, as when it ran (joining.unfinished_turns finds them)."""
        receipts = receipts or {}
        turn = None
        for m in messages:
            if m.get("admission_id") != turn:
                self._ended(receipts.get(turn or ""))
                turn = m.get("admission_id")
            role = m.get("role")
            content = m.get("content")
            if role == "user":
                text = content or ""
                if text.startswith(_RESULTS_MARKER):
                    # the owner's own message carrying background results as JSON: the
                    # answer after it says what they mean
                    text = shorten(text, 100)
                self.newline()
                self.write(self.style("› ", _BOLD) + text + "\n")
            elif role == "assistant":
                for call in m.get("tool_calls") or ():
                    name = (call.get("function") or {}).get("name", "?")
                    self.progress(f"tool {name}")
                if content:
                    self.answer(content)
            elif role == "tool":
                # tool results are long and for the model: their summary and preview
                # stand for them, as when they ran
                try:
                    result = json.loads(content or "{}")
                except (ValueError, TypeError):  # not JSON, or not text
                    continue
                if isinstance(result, dict) and isinstance(result.get("summary"), str):
                    self._on_tool_complete({"summary": result["summary"],
                                            "preview": preview(result)}, None)
        self._ended(receipts.get(turn or ""))

    def _ended(self, receipt: dict[str, Any] | None) -> None:
        if receipt is None:
            return
        if receipt.get("status") == "unknown":
            self.progress("turn unknown: the owner stopped while it ran; whether it "
                          f"finished is unknown (`tether resolve {receipt.get('session_id')}`"
                          " records it interrupted)")
        elif receipt.get("status") == "terminal":
            line = outcome_line(receipt.get("outcome"), (receipt.get("result") or {}).get("error"))
            if line is not None:
                self.progress(line)
