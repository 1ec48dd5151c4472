"""Benchmark (not a test): the eval's own overhead, and its timing self-checks.

Prints the wall time of a full eval of one goal, then of every goal that has a known-good solution in
eval/solutions/. With --do-bench each baseline is also timed by triton.testing.do_bench, and the first
goal, evaluated twice (alone, then within the full pass), gives the repeat agreement per shape.

    python lab/bench_eval_overhead.py [--goal gemm_fp8] [--only-one] [--do-bench] [--out DIR] [--goals G ...]
        [--timing block_ms=0 ...]

`--timing KEY=VALUE` overrides a timing parameter (jg_mcp/eval/timing.py DEFAULTS) for every eval of the run,
so two runs, one per setting, compare timing methods against do_bench on the same machine.

Writes DIR/eval.json (every report plus the figures) and DIR/eval.md after each goal, so an
interrupted run still leaves what it finished.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jg_mcp import log  # noqa: E402
from jg_mcp.eval import EvalOptions, EvalReport, evaluate  # noqa: E402
from jg_mcp.eval.report_md import markdown  # noqa: E402


def run_one(goal: str, root: Path, do_bench: bool, timing: dict) -> tuple[EvalReport, float]:
    ws = Path(tempfile.mkdtemp(prefix=f"{goal}-", dir=root))
    shutil.copyfile(REPO / "eval" / "solutions" / goal / "solution.py", ws / "solution.py")
    start = time.monotonic()
    options = EvalOptions(goal=REPO / "goals" / f"{goal}.yaml", workspace=ws, do_bench=do_bench, timing=timing)
    report = evaluate(options)
    return report, time.monotonic() - start


def verdict(r: EvalReport) -> str:
    if r.accepted:
        return "accepted"
    first = {f.reason: f"{f.shape or ''}: {f.detail.splitlines()[-1][:160] if f.detail else ''}" for f in r.findings}
    return "REJECTED " + "; ".join(f"{k} ({v})" for k, v in first.items())


def do_bench_agreement(reports: list[EvalReport]) -> list[dict]:
    rows = []
    for r in reports:
        for s in r.shapes:
            for name, t in s.baselines.items():
                if t.do_bench_ms:
                    rows.append(
                        {
                            "goal": r.goal,
                            "shape": s.name,
                            "baseline": name,
                            "harness_ms": t.median_ms,
                            "do_bench_ms": t.do_bench_ms,
                            "diff_pct": 100 * (t.median_ms / t.do_bench_ms - 1),
                            "block": t.block,
                            "sm_mhz": s.clocks.sm_mhz_median if s.clocks else None,
                            "power_cap_share": s.clocks.slowdowns.get("sw_power_cap", 0.0) if s.clocks else None,
                        }
                    )
    return rows


def repeat_agreement(a: EvalReport, b: EvalReport) -> list[dict]:
    rows = []
    for sa, sb in zip(a.shapes, b.shapes, strict=False):
        if sa.candidate and sb.candidate:
            m1, m2 = sa.candidate.median_ms, sb.candidate.median_ms
            x1, x2 = max(sa.speedup.values(), default=0.0), max(sb.speedup.values(), default=0.0)
            rows.append(
                {
                    "goal": a.goal,
                    "shape": sa.name,
                    "first_ms": m1,
                    "second_ms": m2,
                    "diff_pct": 100 * abs(m1 - m2) / min(m1, m2),
                    "speedup_diff_pct": 100 * abs(x1 - x2) / min(x1, x2) if min(x1, x2) > 0 else None,
                }
            )
    return rows


def write(out: Path, figures: dict, reports: list[EvalReport]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc = figures | {"reports": [json.loads(r.model_dump_json()) for r in reports]}
    (out / "eval.json").write_text(json.dumps(doc, indent=2))
    lines = ["# jg-mcp eval: known-good solutions", ""]
    lines += [f"- {k}: {v}" for k, v in figures.items() if not isinstance(v, list)]
    lines += ["", "| goal | verdict | geomean speedup | wall s |", "| --- | --- | --- | --- |"]
    for r in reports:
        verdict = "accepted" if r.accepted else "REJECTED " + ", ".join(r.reasons)
        lines.append(f"| {r.goal} | {verdict} | {r.geomean_speedup or 0:.3f} | {r.wall_s:.1f} |")
    for key in ("do_bench_agreement", "repeat_agreement"):
        lines += ["", f"## {key}", "", "| " + " | ".join(figures[key][0]) + " |" if figures[key] else "(none)"]
        if figures[key]:
            lines.append("|" + " --- |" * len(figures[key][0]))
            lines += [
                "| " + " | ".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in row.values()) + " |"
                for row in figures[key]
            ]
    lines += ["", *(markdown(r) for r in reports)]
    (out / "eval.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--goal", default="gemm_fp8", help="the goal evaluated alone first (default gemm_fp8)")
    p.add_argument("--only-one", action="store_true", help="stop after the one-goal eval")
    p.add_argument("--do-bench", action="store_true", help="cross-check baselines with triton.testing.do_bench")
    p.add_argument("--out", type=Path, default=Path("eval-bench-out"), help="where eval.json and eval.md go")
    p.add_argument("--goals", nargs="+", help="the goals of the full pass (default: every goal with a solution)")
    p.add_argument("--timing", nargs="+", default=[], metavar="KEY=VALUE", help="timing parameter overrides")
    args = p.parse_args()
    timing = {k: float(v) for k, v in (item.split("=", 1) for item in args.timing)}
    log.configure("WARNING")
    goals = sorted(
        d.name
        for d in (REPO / "eval" / "solutions").iterdir()
        if (d / "solution.py").is_file() and (REPO / "goals" / f"{d.name}.yaml").is_file()
    )
    goals = [g for g in goals if not args.goals or g in args.goals]
    root = Path(tempfile.mkdtemp(prefix="jg-bench-"))
    first, one_s = run_one(args.goal, root, args.do_bench, timing)
    print(f"one goal ({args.goal}): {one_s:.1f} s wall, {verdict(first)}", flush=True)
    figures: dict = {"one_goal": args.goal, "one_goal_wall_s": round(one_s, 1), "timing_overrides": str(timing)}
    figures |= {"do_bench_agreement": do_bench_agreement([first]), "repeat_agreement": []}
    write(args.out, figures, [first])
    reports: list[EvalReport] = []
    if not args.only_one:
        start = time.monotonic()
        for goal in goals:
            report, wall = run_one(goal, root, args.do_bench, timing)
            reports.append(report)
            print(f"  {goal}: {wall:.1f} s, {verdict(report)}, geomean {report.geomean_speedup}", flush=True)
            figures["all_goals"] = len(reports)
            figures["all_goals_wall_s"] = round(time.monotonic() - start, 1)
            again = next((r for r in reports if r.goal == args.goal), None)
            figures["do_bench_agreement"] = do_bench_agreement(reports)
            figures["repeat_agreement"] = repeat_agreement(first, again) if again else []
            write(args.out, figures, reports)
        print(f"all {len(goals)} goals: {figures['all_goals_wall_s']:.1f} s wall")
    for key in ("do_bench_agreement", "repeat_agreement"):
        worst = max((abs(r["diff_pct"]) for r in figures[key]), default=None)
        print(f"{key}: {len(figures[key])} comparisons, worst {worst if worst is None else round(worst, 2)} %")
        for row in figures[key]:
            print("  " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
