"""The session budget, enforced by the server: wall clock from the first request, optional caps on tool
calls and on seconds spent in run_command.

Two middlewares share one `BudgetState`. The gate (innermost, inside the transcript middleware) answers
every tool call past the budget with an error result saying the budget is spent, so the refusal is
recorded like any other response, and grants each run_command a timeout within what is left. The closer
(outermost of the recorded chain) closes the session with that reason once the refusal is recorded.
The process that started the agent (`jg-mcp run`) sees the close event and stops the agent.

The run_command rule, which holds however many commands run at once: a command is granted at most the
wall clock left, and at most the command seconds left less those granted to the commands still running;
its timeout becomes that grant (or stays its own, when smaller). A command that would be granted under
one second is refused, saying what the running commands hold. Under a budget, `timeout_s` must be a JSON
number: a string, which the tool would otherwise convert after the gate had looked, is refused.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import TYPE_CHECKING

from pydantic import Field

from jg_mcp.models import Strict

if TYPE_CHECKING:
    from mcp.server import MCPServer

    from jg_mcp.live.recording import SessionPool
    from jg_mcp.live.session import Session

SPENT_PREFIX = "budget spent"
"""Start of the close reason and of the error every tool call past the budget gets."""
DEFAULT_TIMEOUT_S = 600.0
"""run_command's own default timeout (jg_mcp.live.server), the request when the call names none."""
MIN_GRANT_S = 1.0
"""The shortest timeout run_command accepts: a command that would be granted less is refused."""


class Budget(Strict):
    wall_clock_minutes: float | None = Field(default=None, gt=0)
    """Wall-clock minutes from the session's first request; None: unlimited."""
    max_tool_calls: int | None = Field(default=None, ge=1)
    """Most tool calls answered; None: unlimited."""
    max_command_seconds: float | None = Field(default=None, gt=0)
    """Most seconds spent inside run_command, summed over calls (commands running at once share what is
    left: each is granted only what the others have not been); None: unlimited."""

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
        self.reserved: dict[int, float] = {}
        """Seconds granted to the commands still running, by a key of each grant."""
        self._keys = itertools.count(1)
        self.reason: str | None = None

    def start(self) -> None:
        if self.started is None:
            self.started = self.clock()

    def grant(self, wanted: float) -> tuple[int, float] | str:
        """Reserve a timeout for a new command: (a key for `settle`, the seconds granted: `wanted` or less),
        or why none can be (under MIN_GRANT_S left). Without a limit on time, `wanted` is granted."""
        free = []
        if self.budget.wall_clock_minutes is not None and self.started is not None:
            free.append(self.budget.wall_clock_minutes * 60 - (self.clock() - self.started))
        if self.budget.max_command_seconds is not None:
            held = sum(self.reserved.values())
            free.append(self.budget.max_command_seconds - self.command_seconds - held)
        granted = min([wanted, *free])
        if granted < MIN_GRANT_S:
            held = sum(self.reserved.values())
            return (
                f"run_command refused: under {MIN_GRANT_S:g}s of the budget is left for it "
                f"({len(self.reserved)} running commands hold {held:.1f}s of it, reserved); "
                "wait for them to finish"
            )
        key = next(self._keys)
        self.reserved[key] = granted
        return key, granted

    def settle(self, key: int, used: float) -> None:
        """A granted command ended after `used` seconds: charge them and free its reservation."""
        self.reserved.pop(key, None)
        self.command_seconds += used

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

    def __init__(self, budget: Budget, pool: SessionPool, clock=time.monotonic):
        self.budget = budget
        self.pool = pool
        self.clock = clock
        self.states: dict[str, BudgetState] = {}

    def session(self, ctx) -> Session:
        return self.pool.get(ctx.session)

    def state(self, session: Session) -> BudgetState:
        if session.run_id not in self.states:
            self.states[session.run_id] = BudgetState(self.budget, self.clock)
        return self.states[session.run_id]


class BudgetGate:
    """Innermost: refuses tool calls past the budget; grants run_command a timeout within what is left (see
    the module's rule), so commands running at once do not together overrun it."""

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
        arguments = params.get("arguments")
        arguments = dict(arguments) if isinstance(arguments, dict) else {}
        wanted = arguments.get("timeout_s", DEFAULT_TIMEOUT_S)
        if isinstance(wanted, bool) or not isinstance(wanted, (int, float)):
            text = f"run_command refused: under a budget, timeout_s must be a JSON number, not {wanted!r}"
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        if not wanted >= MIN_GRANT_S:  # the tool refuses it (nothing runs): no grant to make
            return await call_next(ctx)
        granted = state.grant(float(wanted))
        if isinstance(granted, str):
            return CallToolResult(content=[TextContent(type="text", text=granted)], is_error=True)
        key, seconds = granted
        if seconds < wanted:
            arguments["timeout_s"] = seconds
            ctx = dataclasses.replace(ctx, params={**params, "arguments": arguments})
        start = state.clock()
        try:
            return await call_next(ctx)
        finally:
            state.settle(key, state.clock() - start)


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
                await session.aclose(reason)
        return result


def install(server: MCPServer, pool: SessionPool, budget: Budget, clock=time.monotonic) -> Budgets:
    """Wrap a built server's middleware chain with the budget (around the transcript middleware)."""
    from jg_mcp.live.recording import TranscriptMiddleware

    budgets = Budgets(budget, pool, clock)
    chain = server.middleware
    at = next((i for i, m in enumerate(chain) if isinstance(m, TranscriptMiddleware)), len(chain))
    chain.insert(at, BudgetCloser(budgets))
    chain.append(BudgetGate(budgets))
    return budgets
