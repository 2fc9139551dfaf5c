"""The session settings ``tether acp`` shows an editor: ACP config options (and,
for editors that only know them, session modes).

- ``sandbox``: the boundary around the agent's commands for this editor's
  prompts. The editor may pick the configured ``sandbox.mode`` or anything
  stricter (``off`` < ``workspace-write`` < ``read-only``), never looser: the
  same rule as ``prompt.submit``'s ``sandbox``, which carries the choice.
- ``approvals``: ``approvals.mode`` of the owner's configuration, shown with
  that one value. An editor cannot change it: a client that could lower it
  could be driven by the agent's own commands through the socket
  (docs/decisions.md).
"""

from __future__ import annotations

from typing import Any

from acp import RequestError
from acp.schema import (
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
)

__all__ = ["SANDBOX", "APPROVALS", "Settings"]

SANDBOX, APPROVALS = "sandbox", "approvals"
#: sandbox modes from the loosest to the strictest
_ORDER = ("off", "workspace-write", "read-only")
_SANDBOX_TEXT = {
    "off": ("Sandbox off", "commands run as your user (as configured)"),
    "workspace-write": ("Workspace write", "commands write only the working directory "
                                           "and a private /tmp"),
    "read-only": ("Read only", "commands write nothing but a private /tmp"),
}
_APPROVALS_TEXT = {
    "ask": "Ask: anything not allowed by a rule or the read-only list asks",
    "auto": "Auto: only dangerous commands and writes outside the cwd ask",
    "never": "Never: nothing asks",
}


class Settings:
    """What the owner's configuration allows (runtime.describe's ``sandbox_mode``
    and ``approvals_mode``)."""

    def __init__(self, describe: dict[str, Any]) -> None:
        configured = describe.get("sandbox_mode") or "workspace-write"
        self.sandbox = configured if configured in _ORDER else "workspace-write"
        self.approvals = describe.get("approvals_mode") or "ask"
        self.boundary = describe.get("sandbox") or ""

    def sandbox_choices(self) -> list[str]:
        """The configured mode and every stricter one."""
        return list(_ORDER[_ORDER.index(self.sandbox):])

    def check_sandbox(self, value: Any) -> str:
        """``value`` if an editor may choose it, else a RequestError saying why."""
        if value not in _ORDER:
            raise RequestError(-32602, f"sandbox must be one of {', '.join(_ORDER)}, not "
                                       f"{value!r}")
        if value not in self.sandbox_choices():
            raise RequestError(-32602, f"sandbox {value} is looser than this owner's "
                                       f"sandbox.mode ({self.sandbox}); an editor may only "
                                       "choose that or stricter")
        return str(value)

    def check_approvals(self, value: Any) -> None:
        if value != self.approvals:
            raise RequestError(-32602, f"approvals.mode is {self.approvals}, set in "
                                       "config.yaml; an editor cannot change it")

    def options(self, chosen: str | None) -> list[Any]:
        current = chosen or self.sandbox
        note = f" (here: {self.boundary})" if self.boundary.startswith("none") else ""
        sandbox = SessionConfigOptionSelect(
            type="select", id=SANDBOX, name="Sandbox", category="mode", current_value=current,
            description="The boundary around the agent's commands: the configured mode or "
                        "a stricter one" + note,
            options=[SessionConfigSelectOption(value=m, name=_SANDBOX_TEXT[m][0],
                                               description=_SANDBOX_TEXT[m][1])
                     for m in self.sandbox_choices()])
        approvals = SessionConfigOptionSelect(
            type="select", id=APPROVALS, name="Approvals", current_value=self.approvals,
            description="approvals.mode of config.yaml; not changeable from the editor",
            options=[SessionConfigSelectOption(
                value=self.approvals, name=self.approvals.capitalize(),
                description=_APPROVALS_TEXT.get(self.approvals))])
        return [sandbox, approvals]

    def modes(self, chosen: str | None) -> SessionModeState:
        """The sandbox choices as session modes, for editors without config options."""
        return SessionModeState(
            current_mode_id=chosen or self.sandbox,
            available_modes=[SessionMode(id=m, name=_SANDBOX_TEXT[m][0],
                                         description=_SANDBOX_TEXT[m][1])
                             for m in self.sandbox_choices()])
