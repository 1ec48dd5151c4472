"""`python -m jg_mcp.eval ...`: the eval command alone, for machines without the MCP dependencies."""

import argparse
import sys

from jg_mcp import log
from jg_mcp.commands import eval as eval_command
from jg_mcp.errors import JgError


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m jg_mcp.eval")
    sub = parser.add_subparsers(dest="command", required=True)
    eval_command.register(sub)
    args = parser.parse_args(["eval", *sys.argv[1:]])
    log.configure("INFO")
    try:
        return args.func(args)
    except JgError as exc:
        print(f"jg-mcp eval: {exc}", file=sys.stderr)
        return 1


sys.exit(main())
