"""`jg-mcp run`: one agent session end to end, left in runs/RUN_ID/ with its eval, audit and run.json."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from jg_mcp.commands.arguments import (
    dir_to_fill,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)

if TYPE_CHECKING:
    from jg_mcp.campaign.run_record import RunSpec


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The flags a run shares with `jg-mcp campaign`'s per-run settings."""
    p.add_argument("--condition", default="goal-only", help="goal-only (default), eval-tool, knowledge, workflow")
    p.add_argument(
        "--budget-minutes",
        type=positive_float,
        help="wall-clock budget from the first request (default: the "
        "goal's); the server refuses every tool call after it and the agent is stopped",
    )
    p.add_argument("--max-tool-calls", type=positive_int, help="optional cap on tool calls")
    p.add_argument("--max-command-seconds", type=positive_float, help="optional cap on seconds spent in run_command")
    p.add_argument("--model", help="the model, for agents that take one (claude-code: --model)")
    p.add_argument(
        "--agent-cmd",
        help="command template for --agent command: {mcp_config} {prompt_file} {prompt} "
        "{workspace} {model} {run_dir} {seed} are substituted, shell-quoted",
    )
    p.add_argument(
        "--agent-executable",
        help="the agent's executable (claude-code: default `claude` on PATH, else the one set-up installs in the "
        "checkout's .tools/node_modules/.bin/)",
    )
    p.add_argument(
        "--eval-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra argument for `jg-mcp eval` (repeatable, e.g. --eval-arg=--shapes --eval-arg=smoke)",
    )
    p.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="auto", help="the server's sandbox mode")
    p.add_argument(
        "--grace",
        type=non_negative_float,
        default=10.0,
        help="seconds between SIGTERM and SIGKILL when stopping the agent (default 10)",
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run one agent session on a goal end to end: serve, agent, eval, audit",
        description="Start an agent (claude-code, a command template, or the scripted client) with an MCP config "
        "naming only the jg server, under a named condition with a budget the server enforces; stop it when the "
        "budget is spent; then run `jg-mcp eval` and `jg-mcp audit` on what it left. Everything goes to "
        "OUT/RUN_ID/ (run.json last). A finished run with the same id and conditions is reused, and the command "
        "says so; one that failed to start (no executable, no such GPU, no credentials: it never reached the jg "
        "server) or reached no verdict (its eval failed or timed out) is run again. Exit 0 when the solution was "
        "accepted and its audit clean, 1 otherwise, 2 on a usage error (no such goal, agent or condition; a --run-id "
        "whose finished run was made under other conditions).",
    )
    p.add_argument(
        "--agent", required=True, help="claude-code, command, scripted, scripted-idle, scripted-overrun, scripted-stall"
    )
    p.add_argument("--goal", required=True, help="goal name or YAML path")
    p.add_argument("--seed", type=non_negative_int, default=0, help="replicate index (part of the run id)")
    p.add_argument(
        "--gpu", type=non_negative_int, help="GPU index: CUDA_VISIBLE_DEVICES for the agent, server and eval"
    )
    p.add_argument("--out", type=Path, default=Path("runs"), help="parent directory of run directories")
    p.add_argument(
        "--run-id",
        help="the run directory's name (default: AGENT__GOAL__CONDITION__sSEED__KEY, KEY a hash of the run's "
        "identity: agent, agent version, model, condition, goal and its sha256, budget, seed, eval arguments, sandbox "
        "and jg-mcp's own files); a finished run there made under other conditions is refused",
    )
    add_run_arguments(p)
    p.set_defaults(func=run)


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    """The run `jg-mcp run`'s parsed command line asks for: its one config, built here at the edge."""
    from jg_mcp.campaign.run_record import RunSpec

    return RunSpec(
        agent=args.agent,
        label=None,
        goal=args.goal,
        condition=args.condition,
        seed=args.seed,
        budget_minutes=args.budget_minutes,
        max_tool_calls=args.max_tool_calls,
        max_command_seconds=args.max_command_seconds,
        model=args.model,
        agent_cmd=args.agent_cmd,
        agent_executable=args.agent_executable,
        gpu=args.gpu,
        eval_args=args.eval_arg,
        sandbox=args.sandbox,
        grace_s=args.grace,
    )


def run(args: argparse.Namespace) -> int:
    from jg_mcp.campaign.plan import Plan, reusable
    from jg_mcp.campaign.run import execute
    from jg_mcp.campaign.run_record import FAILED_TO_START, SHOWN_REASON_CHARS, is_finished, load_run
    from jg_mcp.terminal import printable

    dir_to_fill(args.out, "--out")
    spec = spec_from_args(args)
    plan = Plan.resolve(spec, args.run_id)
    run_dir = args.out / plan.run_id
    if reusable(run_dir, plan.identity):
        print(
            f"reusing the finished run {plan.run_id} (its run.json has this run's identity: the same agent and "
            "version, model, condition, goal, budget, seed, eval arguments, sandbox and jg-mcp files); remove its "
            "directory to run it again"
        )
    elif is_finished(run_dir):
        before = load_run(run_dir)
        why = before.exit_reason[:SHOWN_REASON_CHARS]
        print(printable(f"{plan.run_id} ended with no result before ({before.status}: {why}); running it again"))
    record = execute(spec, args.out, args.run_id, plan)
    if record.status == FAILED_TO_START:
        print(printable(f"{record.run_id}: failed to start: {record.exit_reason}"))
    else:
        print(
            printable(
                f"{record.run_id}: {record.exit_reason}; eval {record.eval.status}"
                + (f" ({', '.join(record.eval.reasons)})" if record.eval.reasons else "")
                + f"; audit {'clean' if record.audit_ok else 'FAILED' if record.audit_ok is False else '-'}"
                + (
                    f"; condition violated: {'; '.join(record.condition_violations)}"
                    if record.condition_violations
                    else ""
                )
            )
        )
    print(f"run directory: {args.out / record.run_id}")
    # an audit that failed (the judged kernel is not the transcript's, an edit outside it) makes the verdict unusable
    return 0 if record.eval.status == "accepted" and record.audit_ok and not record.condition_violations else 1
