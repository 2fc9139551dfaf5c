"""``tether chat``: one finite turn, or an interactive session on a terminal (SPEC §8).

Mode rules, decided before anything is sent:

- **finite**: ``-Q``, ``--oneshot``, ``--json``, stdout not a terminal, or stdin
  not a terminal. The prompt is submitted with ``finite: true``: the CLI will
  not be there after the turn, so the owner runs delegations inline and the
  answer includes every child's result. The CLI prints the final answer (only
  the answer with ``-Q``/``--oneshot``) and exits when the turn is terminal.
- **interactive**: stdin and stdout are both terminals (a ``-q`` query just
  seeds the first prompt). Prompts are submitted with ``finite: false``; the
  CLI stays subscribed, so background delegation results that come back as a
  new turn are shown when they arrive.

Both use the resilient submit: the input id is chosen once, and a lost
connection or owner restart leads to a reconnect and a resubmission of the same
input id, never to a second turn or a doubled answer.
"""

from __future__ import annotations

import asyncio
import codecs
import hashlib
import os
import signal
import sys
from typing import Any, NamedTuple

import orjson

from tether.rpc.protocol import MAX_ID_CHARS

from .client import SessionStream, TetherClient, new_input_id
from .exits import CONTEXT, EXIT_OK, EXIT_USAGE, CliError, receipt_exit, report
from .render import Renderer, use_color

__all__ = ["ChatPlan", "plan_chat", "run_chat"]

#: the CLI's own turn options (flag dest -> wire name), sent only when given
TURN_FLAGS = ("provider", "model", "base_url", "toolsets", "reasoning", "max_turns")
#: while waiting on a turn with no events, check its receipt this often
RECEIPT_POLL_SECONDS = 5.0
TITLE_CHARS = 80


class ChatPlan(NamedTuple):  # not a dataclass: building one costs ~0.2 ms more per chat
    query: str | None
    interactive: bool
    quiet: bool  # -Q / --oneshot: only the answer on stdout
    json: bool
    stream_to_terminal: bool  # finite, but stdout is a terminal: show progress live
    options: dict[str, Any]
    resume: str | None
    input_id: str | None


def _isatty(stream: Any) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):
        return False


def _read_query_file(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        where = "stdin" if path == "-" else path
        raise CliError(EXIT_USAGE, "unreadable_query_file", f"cannot read {where}: "
                       f"{getattr(exc, 'strerror', None) or exc}",
                       "give a readable UTF-8 text file, or - for stdin") from None


def _not_text(where: str) -> None:
    raise CliError(EXIT_USAGE, "unreadable_query", f"the prompt from {where} is not UTF-8 text",
                   "give the prompt as UTF-8 text")


def turn_options(args: Any) -> dict[str, Any]:
    """The per-turn options the user gave, under their wire names."""
    options = {name: getattr(args, name) for name in TURN_FLAGS
               if getattr(args, name, None) is not None}
    if getattr(args, "ignore_rules", False):
        options["ignore_rules"] = True
    return options


def plan_chat(args: Any, stdin: Any = None, stdout: Any = None) -> ChatPlan:
    """Decide the mode and read the query; raises CliError (exit 2) for bad input."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    for flag, value in (("--input-id", args.input_id), ("--resume", args.resume)):
        if value is not None and not value.strip():
            raise CliError(EXIT_USAGE, "usage", f"{flag} is empty",
                           f"give {flag} a value, or leave the flag out")
    stdin_tty, stdout_tty = _isatty(stdin), _isatty(stdout)
    quiet = bool(args.quiet or args.oneshot)
    interactive = stdin_tty and stdout_tty and not (quiet or args.json)
    query = args.q
    if args.query_file is not None:
        query = _read_query_file(args.query_file)
    if query is None and not interactive:
        if stdin_tty or stdin is None:
            raise CliError(EXIT_USAGE, "no_query",
                           "this chat runs one finite turn (stdout is not a terminal, or "
                           "-Q/--oneshot/--json was given) but no query was given",
                           'give the prompt with -q "TEXT", --query-file PATH, or on stdin')
        try:
            query = stdin.read()  # `echo prompt | tether chat`
        except UnicodeDecodeError:
            query = None
            _not_text("stdin")
    if query is not None:
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:  # bytes that were not UTF-8, kept as lone surrogates
            _not_text("stdin" if args.q is None and args.query_file in (None, "-")
                      else args.query_file or "-q")
    if query is not None and not query.strip():
        raise CliError(EXIT_USAGE, "empty_query", "the query is empty",
                       'give the prompt with -q "TEXT" or --query-file PATH')
    return ChatPlan(query=query, interactive=interactive, quiet=quiet, json=bool(args.json),
                    stream_to_terminal=stdout_tty and not (quiet or args.json),
                    options=turn_options(args), resume=args.resume, input_id=args.input_id)


def _session_request_id(input_id: str) -> str:
    """The session's request_id for ``--input-id``: ``cli-`` and the id, or a digest
    of an id too long for that to fit the protocol's 200 characters."""
    if len(input_id) <= MAX_ID_CHARS - 4:
        return "cli-" + input_id
    return "cli-sha256-" + hashlib.sha256(input_id.encode()).hexdigest()


async def _session(client: TetherClient, plan: ChatPlan) -> str:
    if plan.resume:
        return plan.resume
    # With --input-id the session is derived from it too, so re-running the same
    # command after a crash of the CLI finds the same session and admission.
    request_id = _session_request_id(plan.input_id) if plan.input_id else (
        "cli-" + os.urandom(9).hex())
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    title = None
    if plan.query:
        title = " ".join(plan.query.split())[:TITLE_CHARS] or None
    snap = await client.resilient(lambda: client.create_session(
        request_id=request_id, source="cli", cwd=cwd, title=title, **plan.options))
    return snap["session_id"]


async def run_chat(home: Any, plan: ChatPlan) -> int:
    client = await TetherClient.connect(home)
    try:
        session_id = await _session(client, plan)
        CONTEXT.session_id = session_id
        if plan.interactive:
            return await _interactive(client, session_id, plan)
        return await _finite(client, session_id, plan)
    finally:
        await client.close()


# -- finite -------------------------------------------------------------------


def _json_line(obj: Any) -> None:
    sys.stdout.write(orjson.dumps(obj).decode() + "\n")
    sys.stdout.flush()


async def _finite(client: TetherClient, session_id: str, plan: ChatPlan) -> int:
    assert plan.query is not None
    input_id = plan.input_id or new_input_id()
    CONTEXT.input_id = input_id
    renderer = None
    if plan.json:
        on_event: Any = _json_line
    elif plan.stream_to_terminal:
        # every turn shown here is this command's: no "new turn" headers
        renderer = Renderer(sys.stdout, color=use_color(sys.stdout), mine=None, headers=False)
        on_event = renderer.event
    else:
        on_event = None
        # a new session's id, so a user can continue it; a resumed one they named
        if not plan.quiet and not plan.resume:
            print(f"[tether] session {session_id} (continue it with "
                  f"`tether chat --resume {session_id}`)", file=sys.stderr)
    receipt = await client.submit_and_wait(session_id, plan.query, input_id=input_id,
                                           finite=True, on_event=on_event, **plan.options)
    failure = receipt_exit(receipt)
    if plan.json:
        _json_line(receipt)
    elif failure is None:
        text = (receipt.get("result") or {}).get("text") or ""
        if renderer is None:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            sys.stdout.flush()
        elif receipt["admission_id"] not in renderer.completed:
            renderer.write(text)
            renderer.newline()
    if failure is not None:
        return report(failure)
    return EXIT_OK


# -- interactive --------------------------------------------------------------


class _TerminalLines:
    """Lines typed on the terminal, read on the event loop (no thread, no readline).

    A thread blocked in ``input()`` would hold stdin's buffer lock at exit; reading
    the file descriptor when the loop says it is readable has no such problem,
    and the terminal's own line editing still applies (canonical mode).
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._partial = ""
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: the terminal went away
            data = b""
        if not data:
            if self._partial:
                self.queue.put_nowait(self._partial)
                self._partial = ""
            self.end()
            return
        self._partial += self._decoder.decode(data)
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self.queue.put_nowait(line)

    def end(self) -> None:
        self._loop.remove_reader(self.fd)
        self.queue.put_nowait(None)

    def close(self) -> None:
        self._loop.remove_reader(self.fd)


class _Interactive:
    def __init__(self, client: TetherClient, session_id: str, plan: ChatPlan) -> None:
        self.client = client
        self.session_id = session_id
        self.plan = plan
        self.mine: set[str] = set()
        self.renderer = Renderer(sys.stdout, color=use_color(sys.stdout), mine=self.mine)
        self.stream = SessionStream(client, session_id)
        self.done: dict[str, asyncio.Future[None]] = {}
        self.turn: str | None = None  # admission id of our turn in progress
        # set while a prompt.submit is in flight: its turn may start before we know
        # its admission id, and must not be shown as somebody else's
        self.submitting: asyncio.Future[None] | None = None
        self.at_prompt = False
        self.interrupting = False
        self.leave_code: int | None = None
        self.lines: _TerminalLines | None = None

    def prompt(self) -> None:
        self.renderer.newline()
        self.renderer.write(self.renderer.style("› ", "\x1b[1m"))
        self.at_prompt = True

    async def follow(self) -> None:
        """Print every event of the session as it arrives, for as long as we chat."""
        while True:
            event = await self.stream.get()
            if event is None:
                continue
            if event.get("type") == "message.start" and self.submitting is not None \
                    and event.get("admission_id") not in self.mine:
                await asyncio.wait({self.submitting})
            if self.at_prompt and event.get("type") not in ("session.info",):
                self.at_prompt = False
                self.renderer.newline()
            self.renderer.event(event)
            if event.get("type") == "message.complete":
                aid = event.get("admission_id")
                fut = self.done.get(aid or "")
                if fut is not None and not fut.done():
                    fut.set_result(None)
                elif aid not in self.mine and self.turn is None:
                    self.prompt()  # a background turn ended while the user was idle

    def on_sigint(self) -> None:
        if self.turn is None:
            self.leave_code = EXIT_OK
            if self.lines is not None:
                self.lines.end()
            return
        if self.interrupting:
            self.leave_code = 130
            fut = self.done.get(self.turn)
            if fut is not None and not fut.done():
                fut.set_result(None)
            return
        self.interrupting = True
        self.renderer.progress("interrupting the turn (Ctrl-C again to leave)")
        task = asyncio.ensure_future(self.client.interrupt(self.session_id))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def submit(self, text: str, input_id: str, follower: asyncio.Task[None]) -> None:
        async def once() -> dict[str, Any]:
            return await self.client.submit(self.session_id, input_id, text, finite=False,
                                            **self.plan.options)

        self.turn = input_id  # Ctrl-C during the submit call interrupts, too
        self.submitting = asyncio.get_running_loop().create_future()
        try:
            receipt = await self.client.resilient(once)
            aid = receipt["admission_id"]
            self.mine.add(aid)
        finally:
            self.submitting.set_result(None)
            self.submitting = None
        self.turn = aid
        fut = self.done.setdefault(aid, asyncio.get_running_loop().create_future())
        try:
            while receipt["status"] not in ("terminal", "unknown") and not fut.done() \
                    and not receipt.get("paused_by"):
                await asyncio.wait({fut, follower}, timeout=RECEIPT_POLL_SECONDS,
                                   return_when=asyncio.FIRST_COMPLETED)
                if follower.done():
                    follower.result()  # the owner stayed away: raise its error
                if not fut.done():
                    # no events for a while: make sure the turn did not end unseen
                    # (owner crash → unknown) — the ledger is the authority
                    receipt = await self.client.resilient(lambda: self.client.receipt(
                        self.session_id, admission_id=aid))
        finally:
            self.turn = None
            self.interrupting = False
        if receipt["status"] == "unknown" or receipt.get("paused_by"):
            report(receipt_exit(receipt))  # type: ignore[arg-type]
        elif aid not in self.renderer.completed and receipt["status"] == "terminal":
            # an input id that had already run (--input-id reused): show its answer
            self.renderer.write((receipt.get("result") or {}).get("text") or "")
            self.renderer.newline()

    async def run(self) -> int:
        snap = await self.client.resilient(self.stream.open)
        r = self.renderer
        if self.plan.resume:
            r.transcript(snap.get("messages") or [])
        r.note(f"tether chat · session {self.session_id} · Ctrl-D leaves, "
               "Ctrl-C interrupts a turn")
        follower = asyncio.ensure_future(self.follow())
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self.on_sigint)
        self.lines = _TerminalLines(sys.stdin.fileno())
        try:
            first = self.plan.query
            first_id = self.plan.input_id
            while self.leave_code is None:
                if first is not None:
                    text, first = first, None
                    r.write(r.style("› ", "\x1b[1m") + text.strip() + "\n")
                else:
                    self.prompt()
                    line = await self._next_line(follower)
                    self.at_prompt = False
                    r.at_line_start = True  # the terminal echoed the user's newline
                    if line is None:
                        break
                    text = line
                if not text.strip():
                    continue
                await self.submit(text, first_id or new_input_id(), follower)
                first_id = None
        finally:
            self.lines.close()
            loop.remove_signal_handler(signal.SIGINT)
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)
        r.newline()
        if r.outstanding:
            print(f"[tether] {len(r.outstanding)} background delegation(s) still running; "
                  f"their results will arrive in session {self.session_id} "
                  f"(`tether attach {self.session_id}`)", file=sys.stderr)
        return self.leave_code if self.leave_code is not None else EXIT_OK

    async def _next_line(self, follower: asyncio.Task[None]) -> str | None:
        assert self.lines is not None
        getter = asyncio.ensure_future(self.lines.queue.get())
        try:
            await asyncio.wait({getter, follower}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():
                getter.cancel()
        if follower.done() and not getter.done():
            follower.result()
        return getter.result() if getter.done() and not getter.cancelled() else None


async def _interactive(client: TetherClient, session_id: str, plan: ChatPlan) -> int:
    return await _Interactive(client, session_id, plan).run()
