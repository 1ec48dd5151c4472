"""`jg-mcp goals list|show|validate`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jg_mcp.errors import GoalError
from jg_mcp.goal_text import render_markdown
from jg_mcp.goals import find_goal, list_goal_files, load_goal


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("goals", help="list, show and validate goals", description="Inspect the goal definitions.")
    p.add_argument("--dir", type=Path, help="goals directory (default: ./goals, else the repository's)")
    gsub = p.add_subparsers(dest="goals_command", metavar="ACTION", required=True)
    ls = gsub.add_parser("list", help="one line per goal with its baselines")
    ls.set_defaults(func=cmd_list)
    show = gsub.add_parser("show", help="print exactly what the agent is given for a goal")
    show.add_argument("name", help="goal name or YAML path")
    show.set_defaults(func=cmd_show)
    val = gsub.add_parser("validate", help="check goal files: schema, callables, reference vs baselines")
    val.add_argument("paths", nargs="*", help="goal YAML files (default: every goal)")
    val.set_defaults(func=cmd_validate)


def cmd_list(args: argparse.Namespace) -> int:
    failed = 0
    for path in list_goal_files(args.dir):
        try:
            g = load_goal(path).goal
        except GoalError as exc:
            print(f"{path.stem:24s} INVALID: {exc}")
            failed += 1
            continue
        print(f"{g.name:24s} {g.title}  [baselines: {', '.join(g.baselines)}]")
    return 1 if failed else 0


def cmd_show(args: argparse.Namespace) -> int:
    print(render_markdown(load_goal(find_goal(args.name, args.dir))), end="")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.paths] or list_goal_files(args.dir)
    failed = 0
    for path in paths:
        try:
            load_goal(path)
            print(f"ok      {path}")
        except GoalError as exc:
            print(f"FAILED  {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0
