"""The session budget, enforced by the server: wall clock from the first request, optional caps on tool
calls and on seconds spent in run_command.

Two middlewares share one `BudgetState`. The gate (innermost, inside the transcript middleware) answers
every tool call past the budget with an error result saying the budget is spent, so the refusal is
recorded like any other response, and shortens a run_command's timeout to what is left. The closer
(outermost of the recorded chain) closes the session with that reason once the refusal is recorded.
The process that started the agent (`jg-mcp run`) sees the close event and stops the agent.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SPENT_PREFIX = "budget spent"
"""Start of the close reason and of the error every tool call past the budget gets."""


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    wall_clock_minutes: float | None = Field(default=None, gt=0)
    """Wall-clock minutes from the session's first request; None: unlimited."""
    max_tool_calls: int | None = Field(default=None, ge=1)
    """Most tool calls answered; None: unlimited."""
    max_command_seconds: float | None = Field(default=None, gt=0)
    """Most seconds spent inside run_command, summed over calls; None: unlimited."""

    def enforced(self) -> bool:
        return any(v is not None for v in (self.wall_clock_minutes, self.max_tool_calls, self.max_command_seconds))


class BudgetState:
    """What the session has used; `spent()` names the first exhausted limit, or None."""

    def __init__(self, budget: Budget, clock=time.monotonic):
        self.budget = budget
        self.clock = clock
        self.started: float | None = None
        self.tool_calls = 0
        self.command_seconds = 0.0
        self.reason: str | None = None

    def start(self) -> None:
        if self.started is None:
            self.started = self.clock()

    def seconds_left(self) -> float | None:
        left = []
        if self.budget.wall_clock_minutes is not None and self.started is not None:
            left.append(self.budget.wall_clock_minutes * 60 - (self.clock() - self.started))
        if self.budget.max_command_seconds is not None:
            left.append(self.budget.max_command_seconds - self.command_seconds)
        return min(left) if left else None

    def spent(self) -> str | None:
        if self.reason is None:
            b = self.budget
            if (
                b.wall_clock_minutes is not None
                and self.started is not None
                and self.clock() - self.started >= b.wall_clock_minutes * 60
            ):
                self.reason = f"{SPENT_PREFIX}: {b.wall_clock_minutes:g} minutes of wall clock"
            elif b.max_tool_calls is not None and self.tool_calls >= b.max_tool_calls:
                self.reason = f"{SPENT_PREFIX}: {b.max_tool_calls} tool calls"
            elif b.max_command_seconds is not None and self.command_seconds >= b.max_command_seconds:
                self.reason = f"{SPENT_PREFIX}: {b.max_command_seconds:g} seconds in run_command"
        return self.reason


class Budgets:
    """One `BudgetState` per session of a server (one over stdio, one per client over HTTP)."""

    def __init__(self, budget: Budget, pool: Any, clock=time.monotonic):
        self.budget = budget
        self.pool = pool
        self.clock = clock
        self.states: dict[str, BudgetState] = {}

    def session(self, ctx) -> Any:
        return self.pool.get(ctx.session)

    def state(self, session: Any) -> BudgetState:
        if session.run_id not in self.states:
            self.states[session.run_id] = BudgetState(self.budget, self.clock)
        return self.states[session.run_id]


class BudgetGate:
    """Innermost: refuses tool calls past the budget; caps run_command's timeout at what is left."""

    def __init__(self, budgets: Budgets):
        self.budgets = budgets

    async def __call__(self, ctx, call_next):
        from mcp.types import CallToolResult, TextContent

        session = self.budgets.session(ctx)
        state = self.budgets.state(session)
        if state.started is None:
            state.start()
            session.notice("info", f"budget clock started: {state.budget.model_dump_json(exclude_none=True)}")
        if ctx.method != "tools/call":
            return await call_next(ctx)
        reason = state.spent()
        if reason is not None:
            message = f"{reason}; the session is closed and no more tool calls will be answered"
            return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)
        state.tool_calls += 1
        params = dict(ctx.params or {})
        if params.get("name") != "run_command":
            return await call_next(ctx)
        left = state.seconds_left()
        arguments = dict(params.get("arguments") or {})
        if left is not None and isinstance(arguments.get("timeout_s", 600), (int, float)):
            arguments["timeout_s"] = max(1.0, min(float(arguments.get("timeout_s", 600)), left))
            ctx = dataclasses.replace(ctx, params={**params, "arguments": arguments})
        start = state.clock()
        try:
            return await call_next(ctx)
        finally:
            state.command_seconds += state.clock() - start


class BudgetCloser:
    """Outside the transcript middleware: once a refusal is recorded, closes the session with the reason."""

    def __init__(self, budgets: Budgets):
        self.budgets = budgets

    async def __call__(self, ctx, call_next):
        result = await call_next(ctx)
        if ctx.method == "tools/call":
            session = self.budgets.session(ctx)
            reason = self.budgets.state(session).reason
            if reason is not None and not session.writer.closed:
                session.notice("warning", f"{reason}: tool calls refused from now on")
                session.close(reason)
        return result


def install(server: Any, pool: Any, budget: Budget, clock=time.monotonic) -> Budgets:
    """Wrap a built server's middleware chain with the budget (around the transcript middleware)."""
    from jg_mcp.live.server import TranscriptMiddleware

    budgets = Budgets(budget, pool, clock)
    chain = server.middleware
    at = next((i for i, m in enumerate(chain) if isinstance(m, TranscriptMiddleware)), len(chain))
    chain.insert(at, BudgetCloser(budgets))
    chain.append(BudgetGate(budgets))
    return budgets
