"""`jg-mcp campaign`: expand a campaign file into runs and execute them, resumably."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from jg_mcp.commands.arguments import dir_to_fill


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "campaign",
        help="run agents x goals x conditions x seeds from a campaign file, one run per GPU at a time",
        description="Expand CAMPAIGN.yaml (agents, goals, conditions, seeds, budget, gpus) into runs with "
        "deterministic ids (a hash of all that defines each run) and execute them: locally one run per GPU "
        "(CUDA_VISIBLE_DEVICES per run) or per CPU slot, or as Ray tasks. Each agent's executable and each GPU are "
        "checked first: a run whose agent or GPU is missing is recorded as `failed to start` without starting. "
        "Finished runs (with run.json) are skipped, so a rerun resumes; --retry-failed reruns only the runs that "
        "failed to start or reached no verdict (their eval failed or timed out, or the run was killed before it). "
        "Progress on stderr. Then `jg-mcp table OUT` makes the table. Exit 0 when every run finished with a result, "
        "1 when any failed to start, reached no verdict or left no run.json.",
    )
    p.add_argument("campaign", type=Path, metavar="CAMPAIGN.yaml")
    p.add_argument("--out", type=Path, help="runs directory (default: runs/CAMPAIGN_NAME)")
    p.add_argument("--executor", choices=["local", "ray"], default="local")
    p.add_argument("--ray-address", help="ray.init(address=...) (default: Ray's: RAY_ADDRESS or a local instance)")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check every agent's executable and every GPU, list the runs (done, todo, failed) and run nothing; "
        "exit 1 when a check fails",
    )
    p.add_argument(
        "--retry-failed", action="store_true", help="run again only the runs that failed to start or reached no verdict"
    )
    p.set_defaults(func=run)


def _state(run_dir: Path) -> str:
    from jg_mcp.campaign.run_record import is_finished, load_run

    if not is_finished(run_dir):
        return "todo"
    return "done" if load_run(run_dir).status == "finished" else "failed"


LOCK_FILE = ".campaign.lock"
"""Held (flock) by the campaign executing into a runs directory: a second one there would run the same runs at once,
each removing the other's run directories."""


def hold(out: Path) -> int:
    """Make `out` and take its campaign lock for as long as this process lives (the descriptor is kept open); a
    UsageError when another campaign holds it."""
    import fcntl
    import os

    from jg_mcp.errors import JgError, UsageError
    from jg_mcp.live.places import make_private_dir

    make_private_dir(out, "the campaign's runs directory")
    try:
        fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:  # a full disk, a link planted there: no campaign runs without its lock
        raise JgError(f"cannot take the campaign lock {out / LOCK_FILE}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UsageError(f"another campaign is running into {out}: wait for it to end, or give another --out") from None
    return fd


def run(args: argparse.Namespace) -> int:
    from jg_mcp.campaign.agents import make_agent
    from jg_mcp.campaign.campaign import expand, load_campaign, run_timeout_s
    from jg_mcp.campaign.executors import Progress, run_local, run_ray
    from jg_mcp.campaign.preflight import gpu_problem
    from jg_mcp.campaign.run import record_failure

    dir_to_fill(args.out, "--out")
    campaign = load_campaign(args.campaign)
    out = args.out or Path("runs") / args.campaign.stem
    dir_to_fill(out, "the campaign's runs directory")  # as given, before `resolve` follows any link on the way
    out = out.resolve()
    if not args.dry_run:
        hold(out)  # before reading any run's state: another campaign there could be changing it
    runs = expand(campaign)
    agents = {a.name(): make_agent(a.adapter, a.model, a.agent_cmd, a.executable) for a in campaign.agents}
    blocked = {label: why for label, agent in agents.items() if (why := agent.missing())}
    gpu_problems = [why for g in campaign.gpus if (why := gpu_problem(g))]
    states = {run_id: _state(out / run_id) for run_id, _ in runs}
    count = Counter(states.values())
    wanted = "failed" if args.retry_failed else "todo"
    todo = [(run_id, spec, run_timeout_s(campaign, spec)) for run_id, spec in runs if states[run_id] == wanted]
    print(
        f"campaign {args.campaign}: {len(runs)} runs, {count['done']} finished, {count['failed']} failed to start or "
        "reached no verdict, "
        f"{len(todo)} to run; out {out}",
        file=sys.stderr,
    )
    for label in agents:
        print(f"agent {label}: {blocked.get(label) or 'ready'}", file=sys.stderr)
    for why in gpu_problems:
        print(f"GPU: {why}", file=sys.stderr)
    if args.dry_run:
        for run_id, _ in runs:
            print(f"{states[run_id]} {run_id}")
        return 1 if blocked or gpu_problems else 0
    if count["failed"] and not args.retry_failed:
        print(
            f"{count['failed']} runs failed to start or reached no verdict earlier: --retry-failed runs them again",
            file=sys.stderr,
        )
    startable = []
    for task in todo:
        run_id, spec, _ = task
        why = blocked.get(spec.label or spec.agent) or "; ".join(gpu_problems)
        if why:
            record_failure(spec, out, run_id, f"agent could not start: {why}")
        else:
            startable.append(task)
    progress = Progress(len(startable))
    if args.executor == "ray":
        run_ray(startable, out, args.ray_address, bool(campaign.gpus), progress)
    else:
        run_local(startable, out, campaign.gpus, campaign.cpu_slots, progress)
    return _summary(runs, out)


def _summary(runs: list, out: Path) -> int:
    from jg_mcp.campaign.run_record import FAILED_TO_START, SHOWN_REASON_CHARS, is_finished, load_run
    from jg_mcp.terminal import lines as terminal_lines

    failed: Counter[str] = Counter()
    missing = done = 0
    for run_id, _ in runs:
        if not is_finished(out / run_id):
            missing += 1
            continue
        record = load_run(out / run_id)
        if record.status == "finished":
            done += 1
        else:
            why = record.exit_reason if record.status == FAILED_TO_START else "; ".join(record.eval.reasons)
            failed[f"{record.status}: {why.split('; ')[0][:SHOWN_REASON_CHARS]}"] += 1
    lines = [f"campaign done: {done}/{len(runs)} runs finished in {out}"]
    lines += [f"  {n} {why}" for why, n in failed.most_common()]
    if missing:
        lines.append(f"  {missing} left no run.json")
    if failed:
        lines.append("  fix what is named, then rerun with --retry-failed")
    lines.append(f"`jg-mcp table {out}` for the table")
    print(terminal_lines(lines), file=sys.stderr)
    return 0 if done == len(runs) else 1
