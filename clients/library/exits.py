"""The CLI's exit codes, and how every failure becomes one line plus a hint (SPEC §8).

    0  completed
    1  the turn failed, was cancelled or interrupted (or its outcome is unknown)
    2  usage or invalid input: bad flags, unreadable or empty query, invalid_params,
       admission_conflict, not_found
    3  cannot reach or start the owner, or it refuses service (draining, overloaded,
       storage_unavailable, internal_error, forbidden)

Errors are printed as ``tether: <reason>: <detail>`` and ``hint: <one line>`` on
stderr, never as a traceback (``TETHER_DEBUG=1`` adds one, for developers).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = [
    "EXIT_OK", "EXIT_TURN", "EXIT_USAGE", "EXIT_OWNER", "EXIT_SIGINT",
    "CliError", "Context", "CONTEXT", "report", "from_exception", "receipt_exit", "with_home",
]

EXIT_OK = 0
EXIT_TURN = 1
EXIT_USAGE = 2
EXIT_OWNER = 3
EXIT_SIGINT = 130  # the shell convention for "ended by Ctrl-C" (128 + SIGINT)

# owner refusals by reason -> (exit code, hint)
_RPC: dict[str, tuple[int, str]] = {
    "invalid_params": (EXIT_USAGE, "check the flags and values; `tether COMMAND --help` lists "
                                   "them"),
    "admission_conflict": (EXIT_USAGE, "that input id was already used with a different prompt "
                                       "or options; pick a new --input-id"),
    "not_found": (EXIT_USAGE, "`tether sessions` lists the sessions this owner knows"),
    "method_not_found": (EXIT_OWNER, "the owner is a different version; restart it with "
                                     "`tether stop` and run the command again"),
    "runtime_draining": (EXIT_OWNER, "the owner is shutting down; run the command again in a "
                                     "moment and a new owner will start"),
    "overloaded": (EXIT_OWNER, "the owner hit one of its limits; try again shortly"),
    "storage_unavailable": (EXIT_OWNER, "the owner cannot use state.db (disk full? locked?); "
                                        "`tether logs` shows the owner's log"),
    "internal_error": (EXIT_OWNER, "a bug in the owner; `tether logs` shows its log, where the "
                                  "error id is"),
    "forbidden": (EXIT_OWNER, "an agent's own commands may not answer approvals or manage "
                              "tokens or cron jobs; run it from your own terminal"),
    "unknown_execution": (EXIT_TURN, "a turn was running when the owner crashed; "
                                     "`tether resolve SESSION` records it interrupted and "
                                     "unpauses the session"),
}


class CliError(Exception):
    """A failure the CLI reports as ``tether: reason: detail`` + hint, then exits ``code``."""

    def __init__(self, code: int, reason: str, detail: str, hint: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.code = code
        self.reason = reason
        self.detail = detail
        self.hint = hint


class Context:
    """What the running command knows, so a late failure can say how to pick up."""

    def __init__(self) -> None:
        self.home: Any = None
        self.remote: Any = None  # the nodes named by --url (remote.py), or None
        self.session_id: str | None = None
        self.input_id: str | None = None
        self.command = "chat"  # the subcommand running, for hints that name one

    def resume_hint(self) -> str:
        if self.session_id and self.input_id:
            return (f"the owner keeps the turn; the same command with `--resume "
                    f"{self.session_id} --input-id {self.input_id}` prints its answer")
        if self.session_id:
            return f"`tether attach {self.session_id}` shows the session"
        return ""


CONTEXT = Context()


def with_home(text: str, home: Any = None) -> str:
    """``text`` with ``<home>`` spelled out when the home is known."""
    home = home if home is not None else CONTEXT.home
    return text.replace("<home>", str(home)) if home is not None else text


def report(err: CliError, stream: Any = None) -> int:
    stream = stream or sys.stderr
    print(f"tether: {err.reason}: {err.detail}", file=stream)
    if err.hint:
        print(f"hint: {with_home(err.hint)}", file=stream)
    return err.code


def from_exception(exc: BaseException) -> CliError:
    """Map any exception to the CliError the user sees."""
    # imports here keep the module free of heavier imports for the fast paths
    from tether.rpc.errors import RpcError

    from .discovery import OwnerUnavailable
    from .routing import ConnectionLost

    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, OwnerUnavailable):
        hint = exc.hint
        if CONTEXT.input_id and CONTEXT.session_id:
            hint = CONTEXT.resume_hint()
        return CliError(EXIT_OWNER, exc.reason, exc.detail, hint)
    if isinstance(exc, ConnectionLost):
        return CliError(EXIT_OWNER, "connection_lost", str(exc),
                        CONTEXT.resume_hint() or "`tether status` shows whether the owner runs")
    if isinstance(exc, RpcError):
        code, hint = _RPC.get(exc.reason, (EXIT_TURN, ""))
        if exc.reason == "unknown_execution" and CONTEXT.session_id:
            hint = hint.replace("SESSION", CONTEXT.session_id)
        hint = hint.replace("COMMAND", CONTEXT.command)
        detail = exc.detail or exc.reason
        if exc.reason == "internal_error" and exc.data.get("error_id"):
            detail += f" (error id {exc.data['error_id']})"
        return CliError(code, exc.reason, detail, hint)
    if isinstance(exc, OSError):
        return CliError(EXIT_OWNER, "os_error", str(exc),
                        "`tether status` shows whether the owner runs")
    return CliError(EXIT_TURN, "unexpected_error", f"{type(exc).__name__}: {exc}",
                    "this is a bug in the tether CLI; TETHER_DEBUG=1 shows the traceback")


def receipt_exit(receipt: dict[str, Any]) -> CliError | None:
    """None for a completed turn, else the CliError (exit 1) describing its end."""
    status = receipt.get("status")
    resolve = f"`tether resolve {receipt.get('session_id')}`"
    if status == "unknown":
        return CliError(EXIT_TURN, "turn_unknown",
                        f"the owner stopped while admission {receipt.get('admission_id')} ran; "
                        "whether it finished is unknown",
                        f"{resolve} records it interrupted and lets the session go on")
    if status == "queued" and (paused_by := receipt.get("paused_by")):
        return CliError(EXIT_TURN, "session_paused",
                        f"admission {receipt.get('admission_id')} is queued behind "
                        f"{', '.join(paused_by)}, which the owner was running when it stopped; "
                        "it runs once they are settled",
                        f"{resolve} settles them; this prompt then runs, and "
                        f"`tether attach {receipt.get('session_id')}` shows its answer")
    outcome = receipt.get("outcome")
    if status == "terminal" and outcome == "completed":
        return None
    error = (receipt.get("result") or {}).get("error") or outcome or status
    hints = {
        "failed": "check the model settings (--provider/--base-url/--model or "
                  "<home>/config.yaml; `tether doctor` tests them); the owner's log: "
                  "`tether logs` (<home>/logs/owner.log)",
        "cancelled": "the turn was cancelled by request (Ctrl-C or another client)",
        "interrupted": "the owner stopped during the turn; ask again to run it anew",
    }
    return CliError(EXIT_TURN, f"turn_{outcome or status}", str(error),
                    hints.get(str(outcome), ""))
