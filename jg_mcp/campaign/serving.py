"""What `jg-mcp serve` takes from campaigns: `apply`, which adds the condition's extras and the budget middleware
to the built server (its --condition and budget flags are `jg_mcp.commands.serve`'s). Light at import: the MCP SDK
is imported only when a server is built."""

from __future__ import annotations

import argparse
from typing import Any


def apply(server: Any, loaded: Any, pool: Any, args: argparse.Namespace) -> Any:
    """Install the condition and, when any limit is set, the budget on a built server; returns it."""
    from jg_mcp.campaign import budget, conditions

    conditions.install(server, loaded, pool, args.condition)
    limits = budget.Budget(
        wall_clock_minutes=args.budget_minutes,
        max_tool_calls=args.max_tool_calls,
        max_command_seconds=args.max_command_seconds,
    )
    if limits.enforced():
        budget.install(server, pool, limits)
    return server
