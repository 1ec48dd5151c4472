"""`jg-mcp campaign`: expand a campaign file into runs and execute them, resumably."""

from __future__ import annotations

import argparse
from pathlib import Path

from jg_mcp.commands.arguments import dir_to_fill


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "campaign",
        help="run agents x goals x conditions x seeds from a campaign file, one run per GPU at a time",
        description="Expand CAMPAIGN.yaml (agents, goals, conditions, seeds, budget, gpus) into runs with "
        "deterministic ids and execute them: locally one run per GPU (CUDA_VISIBLE_DEVICES per run) or per CPU "
        "slot, or as Ray tasks. Finished runs (with run.json) are skipped, so a rerun resumes. Progress on "
        "stderr. Then `jg-mcp table OUT` makes the table. Exit 0 when every run finished with a run.json.",
    )
    p.add_argument("campaign", type=Path, metavar="CAMPAIGN.yaml")
    p.add_argument("--out", type=Path, help="runs directory (default: runs/CAMPAIGN_NAME)")
    p.add_argument("--executor", choices=["local", "ray"], default="local")
    p.add_argument("--ray-address", help="ray.init(address=...) (default: Ray's: RAY_ADDRESS or a local instance)")
    p.add_argument("--dry-run", action="store_true", help="list the runs and whether they are finished; run nothing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from jg_mcp.campaign.campaign import expand, load_campaign, run_timeout_s
    from jg_mcp.campaign.executors import Progress, run_local, run_ray
    from jg_mcp.campaign.run import is_finished

    dir_to_fill(args.out, "--out")
    campaign = load_campaign(args.campaign)
    out = (args.out or Path("runs") / args.campaign.stem).resolve()
    runs = expand(campaign)
    todo = [(run_id, spec, run_timeout_s(campaign, spec)) for run_id, spec in runs if not is_finished(out / run_id)]
    print(
        f"campaign {args.campaign}: {len(runs)} runs, {len(runs) - len(todo)} finished, {len(todo)} to run; out {out}",
        file=sys.stderr,
    )
    if args.dry_run:
        for run_id, _ in runs:
            print(f"{'done' if is_finished(out / run_id) else 'todo'} {run_id}")
        return 0
    progress = Progress(len(todo))
    if args.executor == "ray":
        run_ray(todo, out, args.ray_address, bool(campaign.gpus), progress)
    else:
        run_local(todo, out, campaign.gpus, campaign.cpu_slots, progress)
    missing = [run_id for run_id, _ in runs if not is_finished(out / run_id)]
    print(
        f"campaign done: {len(runs) - len(missing)}/{len(runs)} runs recorded in {out}; "
        f"`jg-mcp table {out}` for the table",
        file=sys.stderr,
    )
    return 0 if not missing else 1
