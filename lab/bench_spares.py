"""Benchmark (not a test): what spares (jg_mcp/eval/processes/spares.py) save when evals run one after another.

Evaluates the known-good solutions one after another, once without spares and once with, the two passes in the
order A B B A over two rounds (a machine that warms up or fills its page cache favours neither), and prints per
pass the total wall time, and per eval the median wall time and the median of the candidate-start phase (the
candidate process's imports, what a spare has done before its eval begins), with the ratio with/without.

    python lab/bench_spares.py [--goals a,b] [--device cpu|cuda] [--out DIR]

On a machine without a GPU the evals run at the small shapes in the Triton interpreter (no timing phase, one
candidate process per eval); with --device cuda, as eval/h200_check.py runs them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jg_mcp.eval import EvalOptions, evaluate  # noqa: E402
from jg_mcp.eval.processes.spares import Spares  # noqa: E402

GOALS = sorted(p.parent.name for p in (REPO / "eval" / "solutions").glob("*/solution.py"))


def one_pass(goals: list[str], device: str, spares: Spares | None) -> dict:
    walls, starts, verdicts = [], [], {}
    begin = time.monotonic()
    for goal in goals:
        ws = Path(tempfile.mkdtemp(prefix="jg-bench-spares-"))
        shutil.copyfile(REPO / "eval" / "solutions" / goal / "solution.py", ws / "solution.py")
        options = {"shapes": "smoke", "domain_shapes": 0} if device == "cpu" else {}
        try:
            report = evaluate(
                EvalOptions(
                    goal=REPO / "goals" / f"{goal}.yaml", workspace=ws, device=device, isolation="bwrap", **options
                ),
                spares=spares,
            )
        finally:
            shutil.rmtree(ws, ignore_errors=True)
        walls.append(report.wall_s)
        starts.append(report.phases["candidate_start"])
        verdicts[goal] = report.accepted
    return {"total_s": time.monotonic() - begin, "walls": walls, "starts": starts, "accepted": verdicts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goals", default=",".join(GOALS))
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    goals = args.goals.split(",")
    passes: dict[str, list[dict]] = {"without": [], "with": []}
    for mode in ("without", "with", "with", "without"):
        if mode == "with":
            with Spares() as spares:
                passes[mode].append(one_pass(goals, args.device, spares))
                passes[mode][-1]["taken"] = spares.taken
        else:
            passes[mode].append(one_pass(goals, args.device, None))
        last = passes[mode][-1]
        print(f"{mode:8s} spares: {last['total_s']:6.1f} s for {len(goals)} evals", flush=True)
    rows = {}
    for mode, runs in passes.items():
        rows[mode] = {
            "total_s": statistics.median(r["total_s"] for r in runs),
            "total_range_s": (min(r["total_s"] for r in runs), max(r["total_s"] for r in runs)),
            "wall_median_s": statistics.median(w for r in runs for w in r["walls"]),
            "start_median_s": statistics.median(s for r in runs for s in r["starts"]),
            "all_accepted": all(all(r["accepted"].values()) for r in runs),
        }
    print(
        "\n| spares | total s (median of 2) | total s (range) | eval wall s (median) | candidate start s (median) "
        "| all accepted |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for mode, row in rows.items():
        low, high = row["total_range_s"]
        print(
            f"| {mode} | {row['total_s']:.1f} | {low:.1f}-{high:.1f} | {row['wall_median_s']:.2f} | "
            f"{row['start_median_s']:.2f} | {row['all_accepted']} |"
        )
    ratio = rows["with"]["total_s"] / rows["without"]["total_s"]
    print(f"\nwith/without, total: {ratio:.3f}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "spares.json").write_text(json.dumps({"device": args.device, "passes": passes, "rows": rows}))
    return 0 if all(row["all_accepted"] for row in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
