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

from ..approvals.policy import Verdict
from ..approvals.service import ApprovalCall, ApprovalService
from ..config.turn import TurnSettings
from ..model.budget import Budget
from ..model.provider import Provider
from ..model.providers import Providers
from .agent import AgentResult, run_agent
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

    def provider(self, settings: TurnSettings) -> Provider:
        """The provider of ``settings``; ResolveError if none fits."""
        return self._providers.for_settings(settings)

    async def budget(self, settings: TurnSettings) -> Budget:
        """How many tokens one request of a run with ``settings`` may send."""
        return await self._providers.windows.budget(settings)

    async def schemas(self, settings: TurnSettings, depth: int, session_id: str = "",
                      client_tools: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The tool schemas a request of such a run sends (they count in its budget):
        the tools offered at this moment and an HTTP client's own."""
        tools = await self._tools.offered(settings.toolsets, depth, session_id)
        return [t.schema() for t in tools.values() if not t.stand_in] + list(client_tools or ())

    async def run(self, run: AgentRun, settings: TurnSettings, messages: list[dict[str, Any]],
                  sink: EventSink, budget: Budget | None = None,
                  progress: AgentResult | None = None,
                  client_tools: list[dict[str, Any]] | None = None,
                  extras: dict[str, Any] | None = None) -> AgentResult:
        """Run the agent to its answer; ResolveError if no provider fits the settings,
        StorageError if what it reported could not be written. Every request is kept
        within ``budget`` (default: the settings' model's, budget.squeeze); ``progress``
        is the result filled as the loop goes; ``client_tools`` and ``extras``: an
        HTTP client's own tools and request keys (agent.run_agent)."""
        provider = self._providers.for_settings(settings)
        budget = budget or await self.budget(settings)

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
            max_turns=settings.max_turns, sink=sink, tool_context=context, budget=budget,
            result=progress, client_tools=client_tools, extras=extras)
        await sink.reported()
        return result
