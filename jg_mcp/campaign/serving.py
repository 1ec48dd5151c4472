"""What `jg-mcp serve` takes from campaigns: the --condition and budget flags, and `apply`, which adds the
condition's extras and the budget middleware to the built server. Light at import: `jg-mcp --help`
registers these flags without the MCP SDK."""

from __future__ import annotations

import argparse
from typing import Any

from jg_mcp.campaign.conditions import NAMES
from jg_mcp.commands.arguments import positive_float, positive_int


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--condition",
        choices=NAMES,
        default="goal-only",
        help="the named condition: goal-only "
        "(default), eval-tool (an `evaluate` tool), knowledge (a notes resource), workflow (a plan "
        "prompt); recorded in the transcript header",
    )
    p.add_argument(
        "--budget-minutes",
        type=positive_float,
        metavar="M",
        help="wall-clock budget from the first request; "
        "after it every tool call is refused and the session closes (default: none)",
    )
    p.add_argument("--max-tool-calls", type=positive_int, metavar="N", help="most tool calls answered (default: none)")
    p.add_argument(
        "--max-command-seconds",
        type=positive_float,
        metavar="S",
        help="most seconds spent in run_command, summed (default: none)",
    )


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
