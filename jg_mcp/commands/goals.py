"""`jg-mcp goals list|show|validate`.

torch (through jg_mcp.validate) is imported only when `validate` runs: listing and showing goals, and
every `--help`, start without it.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from jg_mcp.commands.arguments import input_dir, output_file
from jg_mcp.errors import GoalError, GoalNotFound, UsageError
from jg_mcp.goal_text import render_markdown
from jg_mcp.goals import find_goal, goals_dir, list_goal_files, load_goal
from jg_mcp.live.places import write_output

if TYPE_CHECKING:
    from jg_mcp import validate


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "goals",
        help="list, show and validate goals",
        description="Inspect the goal definitions: goals/NAME.yaml plus goals/NAME.py, found by name in --dir, "
        "./goals or the repository's goals/ (the demo's embedded goal, axpy, by name too).",
        epilog="Exit status: 0 ok, 1 an invalid goal or a failed check, 2 a usage error (no such goal, directory "
        "or --solutions folder).",
    )
    p.add_argument("--dir", type=Path, help="goals directory (default: ./goals, else the repository's)")
    gsub = p.add_subparsers(dest="goals_command", metavar="ACTION", required=True)
    ls = gsub.add_parser(
        "list",
        help="one line per goal with its baselines",
        description="Print one line per goal in the goals directory: name, title and baselines; an invalid goal "
        "is listed with its problem. Exit 1 when any goal is invalid.",
    )
    ls.set_defaults(func=cmd_list)
    show = gsub.add_parser(
        "show",
        help="print exactly what the agent is given for a goal",
        description="Print the goal as the agent receives it (the goal://NAME resource, the server's instructions "
        "and the `goal` prompt are this same Markdown). Exit 1 for a malformed goal, 2 when there is no such goal.",
    )
    show.add_argument("name", help="goal name or YAML path")
    show.add_argument(
        "--policy",
        choices=["open", "triton"],
        default="open",
        help="the eval's source policy whose rules the agent is told (default open: any language)",
    )
    show.set_defaults(func=cmd_show)
    val = gsub.add_parser(
        "validate",
        help="check goals: schema, reference vs baselines, the shipped solution; time baselines on a GPU",
        description="Check every goal (or the named ones): schema and callables; the reference against every "
        "baseline that runs on the device; the shipped eval/solutions/NAME/solution.py through the eval, as any "
        "solution is judged (under the Triton interpreter on the CPU). Smoke shapes by default; --full uses the "
        "timed shapes and, on cuda, times each baseline with triton.testing.do_bench. Exit 1 if anything fails, "
        "2 for a goal that does not exist or --device cuda without a CUDA device.",
    )
    val.add_argument("paths", nargs="*", help="goal YAML files or names (default: every goal)")
    val.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where inputs live and code runs")
    val.add_argument("--full", action="store_true", help="every timed shape instead of the smoke shapes")
    val.add_argument("--solutions", type=Path, help="folder of NAME/solution.py (default: eval/solutions)")
    val.add_argument("--json", type=Path, help="write the full report (checks, timings, versions) here")
    val.add_argument("--markdown", type=Path, help="write the timing table here")
    val.set_defaults(func=cmd_validate)


def _goal_files(directory: Path | None) -> list[Path]:
    """Every goal in the directory; a directory that does not exist is a usage error."""
    if not goals_dir(directory).is_dir():
        raise UsageError(f"--dir {directory}: no such directory")
    return list_goal_files(directory)


def cmd_list(args: argparse.Namespace) -> int:
    failed = 0
    for path in _goal_files(args.dir):
        try:
            g = load_goal(path).goal
        except GoalError as exc:
            print(f"{path.stem:24s} INVALID: {exc}")
            failed += 1
            continue
        print(f"{g.name:24s} {g.title}  [baselines: {', '.join(g.baselines)}]")
    return 1 if failed else 0


def cmd_show(args: argparse.Namespace) -> int:
    loaded = load_goal(find_goal(args.name, args.dir), import_module=False)  # the text needs no torch
    print(render_markdown(loaded, policy=args.policy), end="")
    return 0


def _save(json: Path | None, markdown: Path | None, report: validate.Report) -> None:
    from jg_mcp import validate

    if json:
        write_output(json, report.model_dump_json(indent=2) + "\n", "--json")
    if markdown:
        write_output(markdown, validate.markdown(report), "--markdown")


def cmd_validate(args: argparse.Namespace) -> int:
    import torch

    from jg_mcp import validate

    paths = [find_goal(p, args.dir) for p in args.paths] or _goal_files(args.dir)
    input_dir(args.solutions, "--solutions")
    output_file(args.json, "--json")
    output_file(args.markdown, "--markdown")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA device")
    valid = []
    failed = 0
    for path in paths:
        try:
            load_goal(path)
            valid.append(path)
        except GoalNotFound:
            raise
        except GoalError as exc:
            print(f"FAILED  {exc}", file=sys.stderr)
            failed += 1
    solutions = args.solutions or validate.SOLUTIONS
    save = partial(_save, args.json, args.markdown)
    report = validate.run(valid, args.device, args.full, solutions, emit=partial(print, flush=True), save=save)
    for c in report.failures:
        print(f"FAILED  {c.goal} at shape {c.shape}, {c.check}: {c.error}", file=sys.stderr)
    failed += len(report.failures)
    print(f"{len(valid)} goals, {len(report.checks)} checks, {failed} failed, {report.wall_seconds:.0f} s")
    return 1 if failed else 0
