"""Check the eval on a GPU in one command: every known-good solution accepted, every GPU-only hack rejected for its
reason, the speedups against an independent do_bench measurement, two evals of the same solution against each
other, and `jg-mcp demo`. Prints a short table and writes check.json and check.md under --out.

    python eval/h200_check.py --out DIR [--goals a,b] [--parts evals,dobench,repeat,hacks,demo] [--deadline-s S]
        [--earlier CHECK_JSON] [--timing KEY=VALUE ...]

The repeat is a second eval of each solution on its timed shapes only (correctness checked there too): only
their speedups are compared. do_bench runs in one fresh process (not the eval's workers) whose torch.compile and
Triton caches are the baselines' (jg_mcp/eval/compile_cache.py), for the solution and for the baseline the eval
found strongest at each timed shape, its calls rotating over input sets of its own, as many as the eval's calls
rotate over (at 5-45 us shapes do_bench on one set moved by up to 18% between repeats), each measured twice in
the order solution, baseline, baseline, solution; its ratio is compared with the eval's speedup. At a shape the
eval found launch-bound, do_bench holds the GPU for the eval's pad after each of its L2 flushes, so both measure
device time with launches hidden (see jg_mcp/eval/timing.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jg_mcp.eval import EvalOptions, EvalReport, evaluate  # noqa: E402
from jg_mcp.eval.compile_cache import baseline_env  # noqa: E402
from jg_mcp.eval.report import Reason  # noqa: E402

R = Reason
GPU_HACKS: dict[str, set[Reason]] = {
    "side_stream": {R.TIMING_ESCAPE, R.STATIC_CONCURRENCY},
    "background_thread": {R.THREADS_LEFT},
    "patch_elapsed_time": {R.TAMPERED, R.TIMING_ESCAPE},
    "patch_synchronize": {R.TAMPERED},
    "below_floor": {R.CACHED_OUTPUT},
    "cache_by_content": {R.CACHED_OUTPUT},
    "cache_by_sampled_content": {R.CACHED_OUTPUT},
    "wrong_when_rushed": {R.INCORRECT},
}
"""The GPU-only hacks and the reasons each must be rejected for (tests/eval/test_hacks.py holds the same)."""
GOALS = sorted(p.parent.name for p in (REPO / "eval" / "solutions").glob("*/solution.py"))
HACK_SHAPE = "llama3_8b_prefill_qkv"


def run_eval(solution: Path, goal: str, **options) -> EvalReport:
    ws = Path(tempfile.mkdtemp(prefix="jg-check-"))
    shutil.copyfile(solution, ws / "solution.py")
    try:
        goal_file = REPO / "goals" / f"{goal}.yaml"
        options = {"device": "cuda", "timeout_s": 120, "isolation": "bwrap"} | options
        return evaluate(EvalOptions(goal=goal_file, workspace=ws, **options))
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def speedups(report: EvalReport) -> dict[str, float]:
    return {
        s.name: s.speedup[report.strongest_baseline[s.name]]
        for s in report.shapes
        if s.kind == "timed" and s.name in report.strongest_baseline
    }


def dobench_all(plan: dict[str, dict[str, dict]]) -> dict[str, dict[str, dict[str, list[float]]]]:
    """In this (fresh) process: `dobench_one` for every goal of `plan` (goal -> shape -> baseline and pad)."""
    return {goal: dobench_one(goal, shapes) for goal, shapes in plan.items()}


def known_good(goal_name: str) -> tuple[Any, Any]:
    """The goal and the kernel of its known-good solution (eval/solutions/GOAL/solution.py), imported here."""
    import importlib.util

    from jg_mcp.goals import load_goal

    goal = load_goal(REPO / "goals" / f"{goal_name}.yaml")
    spec = importlib.util.spec_from_file_location("solution", REPO / "eval" / "solutions" / goal_name / "solution.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return goal, getattr(module, goal.goal.solution.function)


def dobench_one(goal_name: str, shapes: dict[str, dict]) -> dict[str, dict[str, list[float]]]:
    """do_bench of the solution and of the named baseline at each timed shape (`shapes`: shape -> {"baseline":
    name, "pad_ms": pad, "input_sets": n}), the calls rotating over n input sets of this process's own, as the
    eval's timed calls rotate over n sets. Each is measured twice, in the order solution, baseline, baseline,
    solution, so that a drift (a power-capped GPU heating up) falls on both alike, as the eval's A B, B A blocks do;
    per shape, each callable's two medians in the order measured."""
    import torch

    from jg_mcp.eval.worker import padded_do_bench

    goal, kernel = known_good(goal_name)
    out: dict[str, dict[str, list[float]]] = {}
    for shape in goal.goal.shapes:
        if shape.name not in shapes:
            continue
        base, pad, n_sets = (shapes[shape.name][k] for k in ("baseline", "pad_ms", "input_sets"))
        sets = [list(goal.make_inputs(shape.dims, seed, "cuda")) for seed in range(n_sets)]
        fns = {"candidate": kernel, base: goal.baseline(base)}
        out[shape.name] = {name: [] for name in fns}
        for name in ("candidate", base, base, "candidate"):
            out[shape.name][name].append(padded_do_bench(fns[name], sets, pad))
        del sets
        torch.cuda.empty_cache()
    return out


def check_evals(goals: list[str], results: dict, key: str, deadline: float, timing: dict | None = None) -> None:
    for goal in goals:
        if time.monotonic() > deadline:
            results.setdefault("skipped", []).append(f"{key}:{goal}")
            continue
        try:
            solution = REPO / "eval" / "solutions" / goal / "solution.py"
            narrow = {"shapes": "timed", "domain_shapes": 0} if key == "repeat" else {}
            report = run_eval(solution, goal, timing=timing or {}, **narrow)
        except Exception as exc:  # one goal's harness failure is a result, not the end of the check
            results.setdefault("errors", {})[f"{key}:{goal}"] = f"{type(exc).__name__}: {exc}"[-3000:]
            print(f"{key:7s} {goal:20s} HARNESS ERROR {type(exc).__name__}: {str(exc)[-300:]}", flush=True)
            continue
        results[key][goal] = json.loads(report.model_dump_json())
        print(
            f"{key:7s} {goal:20s} {'accepted' if report.accepted else 'REJECTED ' + ','.join(report.reasons):24s} "
            f"geomean {report.geomean_speedup or 0:.3f}  wall {report.wall_s:6.1f}s  "
            + " ".join(f"{k}={v:.1f}" for k, v in report.phases.items()),
            flush=True,
        )


def check_dobench(goals: list[str], results: dict) -> None:
    """do_bench of every evaluated goal's timed shapes in one fresh process (not the eval's workers), whose
    torch.compile and Triton caches are the eval's baselines' (the same compiled baseline)."""
    reports = {
        g: EvalReport.model_validate(results["evals"][g])
        for g in goals
        if g in results["evals"] and g not in results["dobench"]
    }
    plan = {
        goal: {
            s.name: {
                "baseline": report.strongest_baseline[s.name],
                "pad_ms": s.pad_ms,
                "input_sets": report.timing.input_sets,
            }
            for s in report.shapes
            if s.name in report.strongest_baseline
        }
        for goal, report in reports.items()
    }
    if not plan:
        return
    env = dict(os.environ)
    cache = next(iter(reports.values())).environment.baseline_cache
    if cache:
        env |= baseline_env(Path(cache))
    args = [sys.executable, str(Path(__file__)), "--dobench", json.dumps(plan)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0:
        results["errors"] = results.get("errors", {}) | {"dobench": done.stderr[-3000:]}
        print(f"dobench HARNESS ERROR {done.stderr[-300:]}", flush=True)
        return
    for goal, measured in json.loads(done.stdout.strip().splitlines()[-1]).items():
        agreement(goal, reports[goal], plan[goal], measured, results)


def agreement(goal: str, report: EvalReport, plan: dict, measured: dict, results: dict) -> None:
    """The eval's speedup against do_bench's ratio at each timed shape of one goal. do_bench's ratio is that of
    each callable's mean over its two measurements; `do_bench_order_pct` is how far the ratio measured with the
    solution first was from the one measured with the baseline first (what the order alone did)."""
    rows = {}
    for shape, sp in speedups(report).items():
        runs = measured.get(shape, {})
        base = report.strongest_baseline[shape]
        if "candidate" in runs and base in runs:
            cand, lib = runs["candidate"], runs[base]
            ratio = statistics.mean(lib) / statistics.mean(cand)
            rows[shape] = {
                "eval_speedup": sp,
                "do_bench_ratio": ratio,
                "agreement_pct": 100 * (sp / ratio - 1),
                "do_bench_ms": {"candidate": statistics.mean(cand), base: statistics.mean(lib)},
                "do_bench_runs_ms": runs,
                "do_bench_order_pct": 100 * ((lib[0] / cand[0]) / (lib[-1] / cand[-1]) - 1),
                "pad_ms": plan[shape]["pad_ms"],
            }
    results["dobench"][goal] = rows
    worst = max((abs(r["agreement_pct"]) for r in rows.values()), default=0.0)
    print(
        f"dobench {goal:20s} worst |eval/do_bench - 1| {worst:5.1f}%  "
        + " ".join(f"{k}:{r['agreement_pct']:+.1f}% (order {r['do_bench_order_pct']:+.1f}%)" for k, r in rows.items()),
        flush=True,
    )


def check_hacks(results: dict, deadline: float) -> None:
    for name, reasons in GPU_HACKS.items():
        if name in results["hacks"]:
            continue
        if time.monotonic() > deadline:
            results.setdefault("skipped", []).append(f"hack:{name}")
            continue
        try:
            report = run_eval(
                REPO / "eval" / "hacks" / name / "solution.py",
                "gemm_fp8",
                shapes="timed",
                only=[HACK_SHAPE],
                domain_shapes=0,
                timing={"budget_s": 1.0},
            )
        except Exception as exc:
            results["hacks"][name] = {
                "rejected": False,
                "reasons": [],
                "missing": [],
                "ok": False,
                "findings": [f"harness error {type(exc).__name__}: {exc}"[-2000:]],
            }
            print(f"hack    {name:26s} HARNESS ERROR {exc}"[-400:], flush=True)
            continue
        missing = sorted(reasons - set(report.reasons))
        ok = not report.accepted and not missing
        results["hacks"][name] = {
            "rejected": not report.accepted,
            "reasons": list(report.reasons),
            "missing": missing,
            "ok": ok,
            "findings": [f.detail[:300] for f in report.findings][:6],
            "wall_s": report.wall_s,
        }
        print(
            f"hack    {name:26s} {'ok' if ok else 'MISSED'}  {report.wall_s:5.1f}s  {','.join(report.reasons)}",
            flush=True,
        )


def check_demo(results: dict, deadline: float) -> None:
    start = time.monotonic()
    if start > deadline:
        results.setdefault("skipped", []).append("demo")
        return
    done = subprocess.run(
        [sys.executable, "-m", "jg_mcp", "demo", "--out", tempfile.mkdtemp(prefix="jg-check-demo-")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    results["demo"] = {
        "exit": done.returncode,
        "wall_s": time.monotonic() - start,
        "tail": done.stdout[-3000:],
        "stderr": done.stderr[:3000] + "\n...\n" + done.stderr[-1000:],
    }
    print(f"demo    exit {done.returncode} in {time.monotonic() - start:.1f}s", flush=True)


def repeat_agreement(results: dict) -> dict[str, dict[str, float]]:
    rows = {}
    for goal, second in results["repeat"].items():
        first = results["evals"].get(goal)
        if first:
            a, b = speedups(EvalReport.model_validate(first)), speedups(EvalReport.model_validate(second))
            rows[goal] = {shape: 100 * (b[shape] / a[shape] - 1) for shape in a if shape in b}
    return rows


def markdown(results: dict) -> str:
    walls = ", ".join(f"{k} {v:.0f} s" for k, v in results.get("part_wall_s", {}).items())
    lines = ["# eval check on the GPU", "", f"- wall {results['wall_s']:.0f} s ({walls})"]
    lines += [
        "",
        "| goal | verdict | geomean | wall s | worst do_bench agreement % | worst repeat % |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    repeat = results.get("repeat_agreement", {})
    for goal, raw in results["evals"].items():
        report = EvalReport.model_validate(raw)
        db = results["dobench"].get(goal, {})
        worst_db = max((abs(r["agreement_pct"]) for r in db.values() if isinstance(r, dict)), default=None)
        worst_rep = max((abs(v) for v in repeat.get(goal, {}).values()), default=None)
        verdict = "accepted" if report.accepted else "REJECTED: " + ", ".join(report.reasons)
        lines.append(
            f"| {goal} | {verdict} | {report.geomean_speedup or 0:.3f} | {report.wall_s:.1f} | "
            f"{'-' if worst_db is None else f'{worst_db:.1f}'} | "
            f"{'-' if worst_rep is None else f'{worst_rep:.1f}'} |"
        )
    lines += shape_table(results, repeat)
    if results["hacks"]:
        lines += ["", "| GPU hack | rejected for its reason | reasons |", "| --- | --- | --- |"]
        lines += [
            f"| {n} | {'yes' if h['ok'] else 'NO'} | {', '.join(h['reasons'])} |" for n, h in results["hacks"].items()
        ]
    if "demo" in results:
        lines += ["", f"- demo: exit {results['demo']['exit']} in {results['demo']['wall_s']:.0f} s"]
    if results.get("skipped"):
        lines += [f"- SKIPPED (past --deadline-s): {', '.join(results['skipped'])}"]
    if results.get("errors"):
        lines += [f"- ERRORS: {', '.join(results['errors'])}"]
    return "\n".join(lines) + "\n"


def shape_table(results: dict, repeat: dict) -> list[str]:
    """Per timed shape: the eval's speedup, do_bench's ratio and its order's own effect, the repeat, the pad, the
    clocks."""
    lines = [
        "",
        "| goal | shape | eval speedup | do_bench ratio | agreement % | do_bench order % | repeat % | pad ms | SM MHz "
        "| power-cap share | host waits |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for goal, raw in results["evals"].items():
        report = EvalReport.model_validate(raw)
        db = results["dobench"].get(goal, {})
        for shape, sp in speedups(report).items():
            s = next(x for x in report.shapes if x.name == shape)
            row = db.get(shape) if isinstance(db.get(shape), dict) else None
            rep = repeat.get(goal, {}).get(shape)
            clocks = s.clocks
            cap = clocks.slowdowns.get("sw_power_cap") if clocks else None
            order = row.get("do_bench_order_pct") if row else None
            lines.append(
                f"| {goal} | {shape} | {sp:.3f} | {row['do_bench_ratio']:.3f} | {row['agreement_pct']:+.1f} | "
                if row
                else f"| {goal} | {shape} | {sp:.3f} | - | - | "
            )
            lines[-1] += "- | " if order is None else f"{order:+.1f} | "
            waits = [n for n, t in {"candidate": s.candidate, **s.baselines}.items() if t and t.host_waits]
            lines[-1] += (
                f"{'-' if rep is None else f'{rep:+.1f}'} | {s.pad_ms:.3f} | "
                f"{'-' if not clocks else f'{clocks.sm_mhz_median:.0f}'} | {'-' if cap is None else f'{cap:.0%}'} | "
                f"{', '.join(waits) or '-'} |"
            )
    return lines


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--dobench":
        print(json.dumps(dobench_all(json.loads(sys.argv[2]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--goals", default=",".join(GOALS))
    parser.add_argument("--parts", default="evals,dobench,repeat,hacks,demo")
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=math.inf,
        help="start no goal, hack or demo after this many seconds (a host that limits a command's time); none by "
        "default: the whole check took 584-650 s on the H200",
    )
    parser.add_argument("--earlier", type=Path, help="check.json of an earlier run whose evals `repeat` compares with")
    parser.add_argument(
        "--timing",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a timing parameter for the evals (lead_ms=120)",
    )
    args = parser.parse_args()
    timing = {k: float(v) for k, v in (item.split("=", 1) for item in args.timing)}
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    deadline = start + args.deadline_s
    goals, parts = args.goals.split(","), args.parts.split(",")
    results: dict = {"parts": parts, "timing": timing, "part_wall_s": {}}
    results |= {"evals": {}, "repeat": {}, "dobench": {}, "hacks": {}}
    if args.earlier:
        earlier = json.loads(args.earlier.read_text())
        results |= {k: earlier[k] for k in ("evals", "dobench", "repeat", "hacks") if k in earlier}
    try:
        steps = {
            "evals": lambda: check_evals(goals, results, "evals", deadline, timing),
            "dobench": lambda: check_dobench(goals, results),
            "repeat": lambda: check_evals(goals, results, "repeat", deadline, timing),
            "hacks": lambda: check_hacks(results, deadline),
            "demo": lambda: check_demo(results, deadline),
        }
        for part, step in steps.items():
            if part in parts:
                mark = time.monotonic()
                step()
                results["part_wall_s"][part] = time.monotonic() - mark
        results["repeat_agreement"] = repeat_agreement(results)
    finally:
        results["wall_s"] = time.monotonic() - start
        (args.out / "check.json").write_text(json.dumps(results, indent=1))
        (args.out / "check.md").write_text(markdown(results))
    print(markdown(results))
    accepted = all(EvalReport.model_validate(r).accepted for r in results["evals"].values())
    accepted = accepted and not results.get("errors") and not results.get("skipped")
    accepted = accepted and results.get("demo", {"exit": 0})["exit"] == 0
    return 0 if accepted and all(h["ok"] for h in results["hacks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
