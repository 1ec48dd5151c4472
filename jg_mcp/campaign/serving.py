"""What `jg-mcp serve` takes from campaigns: `apply`, which adds the condition's extras and the budget middleware
to the built server (its --condition and budget flags are `jg_mcp.commands.serve`'s). Light at import: the MCP SDK
is imported only when a server is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jg_mcp.campaign.budget import Budget

if TYPE_CHECKING:
    from mcp.server import MCPServer

    from jg_mcp.goals import LoadedGoal
    from jg_mcp.live.recording import SessionPool


def apply(server: MCPServer, loaded: LoadedGoal, pool: SessionPool, condition: str, limits: Budget) -> MCPServer:
    """Install the condition and, when any limit is set, the budget on a built server; returns it."""
    from jg_mcp.campaign import budget, conditions

    conditions.install(server, loaded, pool, condition)
    if limits.enforced():
        budget.install(server, pool, limits)
    return server
