"""The agent engine: one way to run an agent, for a turn and for a child alike.

``Engine.run`` takes a run's resolved settings, its messages and the sink its
progress goes to; it picks the provider and the tools the settings allow at
the agent's depth, gives each tool call a `ToolContext` with the run's
capabilities, runs the loop (agent.py), and waits until everything the run
reported is written. What differs between a turn and a child (where the
messages come from, how the outcome is recorded) stays with the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .agent import AgentResult, run_agent
from .approvals.policy import Verdict
from .approvals.service import ApprovalCall, ApprovalService
from .providers import Providers
from .settings import TurnSettings
from .sink import EventSink
from .tools import ToolContext, ToolRegistry

__all__ = ["Engine", "AgentRun"]


@dataclass(frozen=True)
class AgentRun:
    """Who runs: the session (and admission) the agent works for, and how deep."""

    session_id: str
    admission_id: str | None
    depth: int
    #: whether a result may be delivered after the run (see ToolContext.late_delivery)
    late_delivery: bool
    #: the session's working directory
    cwd: str | None = None
    #: whether a person can answer approval prompts (an interactive turn; never a child)
    attended: bool = False


class Engine:
    def __init__(self, providers: Providers, tools: ToolRegistry,
                 approvals: ApprovalService | None = None) -> None:
        self._providers = providers
        self._tools = tools
        self._approvals = approvals

    async def run(self, run: AgentRun, settings: TurnSettings, messages: list[dict[str, Any]],
                  sink: EventSink, client_tools: list[dict[str, Any]] | None = None,
                  extras: dict[str, Any] | None = None) -> AgentResult:
        """Run the agent to its answer; ResolveError if no provider fits the settings,
        StorageError if what it reported could not be written."""
        provider = self._providers.for_settings(settings)

        approvals = self._approvals

        def context(call_id: str) -> ToolContext:
            async def approve(tool: str, kind: str, subject: str, *, sandbox: str = "none",
                              escalate: bool = False, reason: str | None = None) -> Verdict:
                if approvals is None:
                    return Verdict(False, "denied: this owner has no approval service")
                call = ApprovalCall(run.session_id, run.admission_id, call_id, tool, run.cwd,
                                    run.attended)
                return await approvals.check(call, kind, subject, sandbox=sandbox,
                                             escalate=escalate, reason=reason)

            return ToolContext(session_id=run.session_id, admission_id=run.admission_id,
                               call_id=call_id, depth=run.depth, settings=settings,
                               late_delivery=run.late_delivery, emit=sink.event, cwd=run.cwd,
                               attended=run.attended, approve=approve)

        result = await run_agent(
            provider=provider, model=settings.model, reasoning=settings.reasoning,
            messages=messages,
            tools=await self._tools.offered(settings.toolsets, run.depth, run.session_id),
            max_turns=settings.max_turns, sink=sink, tool_context=context,
            client_tools=client_tools, extras=extras)
        await sink.settle()
        return result
