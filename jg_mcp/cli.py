"""`jg-mcp`: the command line. Each subcommand lives in its own module with `register(subparsers)`.

Exit codes, the same for every subcommand (README, "Exit status"): 0 success (or accepted), 1 a verdict or a
failure (a JgError: rejected, failed checks, a malformed goal, transcript or campaign file), 2 a usage error
(a UsageError, or argparse's own: a missing or bad argument, a named file or directory that does not exist), 3 an
eval without a verdict (a NoVerdict: the harness or the host failed).
Either is a short message on stderr, never a traceback; tests/commands/test_cli_contract.py holds every command to it.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from jg_mcp import __version__, log
from jg_mcp.errors import JgError
from jg_mcp.terminal import guarded

COMMAND_MODULES = [
    "jg_mcp.commands.serve",
    "jg_mcp.commands.goals",
    "jg_mcp.commands.gpu",
    "jg_mcp.commands.eval",
    "jg_mcp.commands.demo",
    "jg_mcp.commands.replay",
    "jg_mcp.commands.audit",
    "jg_mcp.commands.run",
    "jg_mcp.commands.campaign",
    "jg_mcp.commands.table",
    "jg_mcp.commands.mark",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jg-mcp",
        description="Point any MCP-capable agent at a GPU-kernel goal under the goal-only condition, "
        "re-verify the kernel it leaves, and audit the session.",
        epilog="Exit status of every command: 0 success or accepted, 1 a verdict or a failure, 2 a usage error "
        "(a missing or bad argument, a named file or directory that does not exist), 3 an eval without a verdict "
        "(the harness or the host failed).",
    )
    parser.add_argument("--version", action="version", version=f"jg-mcp {__version__}")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; whatever it prints goes through `guarded`, so no command's output can steer the
    reviewer's terminal, a print that forgot to escape the agent's text included."""
    parser = build_parser()
    args = parser.parse_args(argv)
    log.configure(args.log_level)
    with guarded():
        try:
            return int(args.func(args) or 0)
        except JgError as exc:
            print(f"jg-mcp {args.command}: {exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            return 130


if __name__ == "__main__":
    sys.exit(main())
