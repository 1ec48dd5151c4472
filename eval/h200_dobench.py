"""The independent measurement eval/h200_check.py compares the eval's speedups with. do_bench runs in one fresh
process (not the eval's workers) whose torch.compile and Triton caches are the baselines'
(jg_mcp/eval/processes/compile_cache.py), for the solution and for the baseline the eval found strongest at each timed
shape, its calls rotating over the eval's own timed input sets, made again in its process from the seeds the report
publishes (at 5-45 us shapes do_bench on one set moved by up to 18% between repeats), each measured four times in the
order solution, baseline, baseline, solution, twice over; its ratio (of the two callables' medians over their four)
is compared with the eval's speedup, with times read as medians (the eval's) and as interquartile means
(eval/h200_tables.py). At a shape the
eval timed under CUDA graphs (`timed_by: graph`, a few microseconds per call), the independent measurement is a graph
too, built by other code (eval/independent_graph.py's `graph_times`: one graph of calls rotating over the eval's graph
input sets, made again from the seeds the report publishes, each tensor in an allocation of its own and each call's
outputs kept, as in the eval's graphs; warmed up and timed for as long as do_bench warms up and times its calls,
25 and 100 ms), not do_bench, whose per-call flush and events add microseconds to every call there (`measured_by`
says which). Timed with no warm-up (ten replays right after its capture) the independent graph read within 0.1% of
the warmed one, both 4-14% above the eval's at rope's and softmax's smallest shapes. Under the part `dobench_burst`,
`graph_burst_runs_ms` holds the same graph timed in the eval's pattern (eval/independent_graph.py's
`graph_burst_times`: rounds of a 30 ms lead, the GPU idle for 1 ms, three timed replays); it stayed within 0.4% of the
steady graph in the same process (a new capture aside: the graph state of lab/state_probe.py,
docs/decisions/2026-12-03-graph-state-across-processes.md), so the default part does not spend its time on it.

The part `dobench_repeat` of h200_check (not run unless named) measures do_bench again in a second fresh process:
how far the independent measurement's own ratio moves between two processes, beside the eval's repeat;
`dobench_cleared` (not run unless named) measures it in a fresh process with the environment the eval gives its
workers, and the parts of VARIANT_ENV (not run unless named) each with one other thing varied. Parts named
`dobench_split...` (`dobench_split1,dobench_split2,...`; not run unless named) each time the solution in one fresh
process and the baseline in another, the eval's arrangement, to read with eval/h200_spread.py.

Run as `python eval/h200_dobench.py PLAN [candidate|baseline]` (what `check_dobench` starts), it measures the
plan's shapes in that process and prints the measurements as JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jg_mcp.eval import EvalReport  # noqa: E402
from jg_mcp.eval.clocks import device_sampler  # noqa: E402
from jg_mcp.eval.options import TimingParams  # noqa: E402
from jg_mcp.eval.processes.compile_cache import baseline_env, bytecode_dir  # noqa: E402

sys.path.insert(0, str(REPO / "eval"))
from h200_tables import speedups  # noqa: E402
from independent_graph import RENEWALS  # noqa: E402


def dobench_all(plan: dict[str, dict[str, dict]], only: str | None = None) -> None:
    """In this (fresh) process: `dobench_one` for every goal of `plan` (goal -> shape -> baseline and sets), each
    goal's measurements printed as one JSON line once it is measured, so that a process stopped at its time limit
    leaves the goals it finished (`run_measuring`)."""
    for goal, shapes in plan.items():
        print(json.dumps({goal: dobench_one(goal, shapes, only)}), flush=True)


def run_measuring(args: list[str], env: dict[str, str], timeout_s: float) -> tuple[dict, str | None]:
    """Run a measuring process (`dobench_all`) for at most `timeout_s`: the goals it printed, merged, and what went
    wrong (None: it ended well). Past its time it is killed and the goals it finished are kept, so a command's time
    limit costs only the goal it cut."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(args, stdout=out, stderr=err, text=True, env=env)
        try:
            proc.wait(timeout=timeout_s)
            problem = None
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            problem = f"stopped at its time limit of {timeout_s:.0f} s"
        out.seek(0)
        err.seek(0)
        measured: dict = {}
        for line in out:
            with contextlib.suppress(json.JSONDecodeError):  # a line the kill cut, or another's output
                if isinstance(part := json.loads(line), dict):
                    merge_measured(measured, part)
        if problem is None and proc.returncode != 0:
            problem = f"exit {proc.returncode}: {err.read()[-3000:]}"
        return measured, problem


VARIANT_ENV = {
    "dobench_mapped": {"JG_CHECK_MAPPED": "1"},
    "dobench_history": {"JG_CHECK_HISTORY": "1"},
    "dobench_unsampled": {"JG_CHECK_UNSAMPLED": "1"},
    "dobench_lean": {"JG_CHECK_LEAN": "1"},
    "dobench_burst": {"JG_CHECK_BURST": "1"},
    "dobench_renewed": {"JG_CHECK_RENEWED": "1"},
}
"""Parts that measure do_bench again with one thing varied (not run unless named), each by its process's
environment: `dobench_mapped` times the independent graphs on input sets another process holds, mapped as the
eval's workers map the harness's (eval/imported_inputs.py); `dobench_history` times each callable per call, as the
eval does before its graphs, in the process right before its graph; `dobench_unsampled` reads no clocks (the eval
samples NVML in another process than the one timed, do_bench in its own); `dobench_lean` frees the sets made
from the seeds once the graph's copies of them are made (a worker holds only the copies it maps). Each measures
only the shapes the eval timed under CUDA graphs (what they vary is the graph gap); `dobench_burst` also times each
graph in the eval's pattern (`graph_burst_times`); `dobench_renewed` also times single replays after the inputs were
renewed, the L2 cleared, or both (`graph_renewed_times`, one series per way)."""
RENEWED_ROUNDS = 16
"""Single replays per way and callable in `dobench_renewed`, measured at each callable's first measurement only:
enough for the deciles to show a slow mode that only some replays fall into
(docs/decisions/2026-12-06-graph-replays-on-renewed-inputs.md), in a part short enough for one device command
(every way at each of the eight measurements took minutes per goal)."""
DOBENCH_ROUNDS = 2
"""Rounds of do_bench per shape, each solution, baseline, baseline, solution. With one round, one of its two
measurements decided: at rope's 9 us decode shape the compiled baseline took 0.00896 then 0.01040 ms in one
process (15%), at gemm_bf16's power-capped qkv 0.262 then 0.292 ms; the median of four is not moved by one such."""


def dobench_calls(base: str, only: str | None) -> tuple[str, ...]:
    """The order of one shape's do_bench measurements: solution, baseline, baseline, solution, DOBENCH_ROUNDS times;
    with `only`
    (`candidate` or `baseline`, a split run), that callable's two."""
    calls = ("candidate", base, base, "candidate") * DOBENCH_ROUNDS
    if only is None:
        return calls
    return tuple(c for c in calls if (c == "candidate") == (only == "candidate"))


def merge_measured(into: dict, part: dict) -> dict:
    """Add one process's measurements (goal -> shape -> statistic -> callable -> times) to another's."""
    for goal, shapes in part.items():
        for shape, stats in shapes.items():
            for stat, names in stats.items():
                into.setdefault(goal, {}).setdefault(shape, {}).setdefault(stat, {}).update(names)
    return into


def known_good(goal_name: str) -> tuple[Any, Any]:
    """The goal and the kernel of its known-good solution (eval/solutions/GOAL/solution.py), imported here."""
    import importlib.util

    from jg_mcp.goals import load_goal

    goal = load_goal(REPO / "goals" / f"{goal_name}.yaml")
    path, function = module_of(goal_name, goal, "candidate")
    spec = importlib.util.spec_from_file_location("solution", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return goal, getattr(module, function)


def dobench_one(
    goal_name: str, shapes: dict[str, dict], only: str | None = None
) -> dict[str, dict[str, dict[str, list[float]]]]:
    """do_bench of the solution and of the named baseline at each timed shape (`shapes`: shape -> {"baseline":
    name, "input_sets": n, "seeds": the eval's}), the calls rotating over the eval's timed input
    sets (made again here from their seeds; seeds 0..n-1 for a report without them), as the eval's calls did. Each
    is measured in the order solution, baseline, baseline, solution (DOBENCH_ROUNDS times), so that a drift (a
    power-capped GPU heating up) falls on both alike, as the eval's A B, B A blocks do; per shape and statistic
    (`median`, `iqm`, and `mhz`: NVML's median SM clock during the measurement), each callable's values in the
    order measured."""
    import torch
    from independent_graph import OtherContext, graph_burst_times, graph_renewed_times, graph_times

    from jg_mcp.eval.candidate.worker_commands import rotating_do_bench
    from jg_mcp.eval.sizing import iqm

    goal, kernel = known_good(goal_name)
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    other: OtherContext | None = None
    for shape in goal.goal.shapes:
        if shape.name not in shapes:
            continue
        base, n_sets = (shapes[shape.name][k] for k in ("baseline", "input_sets"))
        seeds = shapes[shape.name].get("seeds") or list(range(n_sets))
        graph_seeds = shapes[shape.name].get("graph_seeds") or []
        sets = [list(goal.make_inputs(shape.dims, seed, "cuda")) for seed in graph_seeds or seeds]
        calls = dobench_calls(base, only)
        binding, own = placed(goal_name, shape.name, graph_seeds, sets) if graph_seeds else (None, sets)
        if graph_seeds and os.environ.get("JG_CHECK_LEAN"):  # only the graph's own copies stay, as in the workers
            sets = own
            torch.cuda.empty_cache()
        fns = {name: kernel if name == "candidate" else goal.baseline(base) for name in dict.fromkeys(calls)}
        out[shape.name] = {"median": {name: [] for name in fns}, "iqm": {name: [] for name in fns}}
        out[shape.name] |= {"mhz": {name: [] for name in fns}}
        for name in calls:
            if graph_seeds and os.environ.get("JG_CHECK_HISTORY"):  # the eval's per-call timing comes first
                rotating_do_bench(fns[name], sets)
            unsampled = os.environ.get("JG_CHECK_UNSAMPLED")
            with (None if unsampled else device_sampler("cuda")) or contextlib.nullcontext() as sampler:
                if graph_seeds:
                    times = graph_times(fns[name], own, keep=True)
                else:
                    times = rotating_do_bench(fns[name], sets)
            clocks = sampler.summary() if sampler else None
            out[shape.name]["median"][name].append(statistics.median(times))
            out[shape.name]["iqm"][name].append(iqm(times))
            out[shape.name]["mhz"][name].append(clocks.sm_mhz_median if clocks else None)
            if graph_seeds and os.environ.get("JG_CHECK_BURST"):  # the eval's pattern: a lead, a gap, three replays
                out[shape.name].setdefault("graph_burst", {}).setdefault(name, []).append(
                    statistics.median(graph_burst_times(fns[name], own))
                )
            renewed = out[shape.name].get("graph_renewed", {})
            if graph_seeds and os.environ.get("JG_CHECK_RENEWED") and name not in renewed:
                # the eval's order (renew, clear, one replay), once per callable: four ways of RENEWED_ROUNDS replays
                fresh = [list(goal.make_inputs(shape.dims, seed ^ 1, "cuda")) for seed in graph_seeds]
                for way, (renew, clear, elsewhere) in RENEWALS.items():
                    other = other or (OtherContext() if elsewhere else None)
                    times = graph_renewed_times(
                        fns[name], own, fresh, renew, clear, other if elsewhere else None, rounds=RENEWED_ROUNDS
                    )
                    series = out[shape.name]
                    series.setdefault(f"graph_{way}", {}).setdefault(name, []).append(statistics.median(times))
                    deciles = statistics.quantiles(times, n=10, method="inclusive")
                    series.setdefault(f"graph_{way}_q10", {}).setdefault(name, []).append(deciles[0])
                    series.setdefault(f"graph_{way}_q90", {}).setdefault(name, []).append(deciles[8])
                del fresh
        if binding is not None:
            binding.free()
        del sets, own
        torch.cuda.empty_cache()
    if other is not None:
        other.close()
    return out


def module_of(goal_name: str, goal: Any, name: str) -> tuple[Path, str]:
    """The file and function of a callable: the known-good solution's (`candidate`), else the goal's baseline."""
    if name == "candidate":
        return REPO / "eval" / "solutions" / goal_name / "solution.py", goal.goal.solution.function
    return goal.module_path, goal.goal.baselines[name].function


def placed(goal_name: str, shape_name: str, seeds: list[int], sets: list[list]) -> tuple[Any, list[list]]:
    """Where an independent graph reads its inputs, and what holds them: `dedicated` copies, or with
    JG_CHECK_MAPPED set (the part `dobench_mapped`), sets held by another process and mapped here, as the eval's
    workers map the harness's buffers (eval/imported_inputs.py)."""
    if not os.environ.get("JG_CHECK_MAPPED"):
        return dedicated(sets)
    from imported_inputs import Imported

    held = Imported(goal_name, shape_name, seeds)
    return held, held.groups


def dedicated(sets: list[list]) -> tuple[Any, list[list]]:
    """Copies of the input sets with each tensor in an allocation of its own, where the eval's processes read their
    inputs (shared buffers, one per tensor; jg_mcp/eval/wire/buffers.py), and the binding that holds them. Measured on
    the H200 beside the same graph on the caching allocator's memory: no difference over 0.3% at any
    graph-timed shape but the cuBLASLt baseline at gemm_fp8's decode shape (1.3%)."""
    from jg_mcp.eval.wire.buffers import SharedBinding

    binding = SharedBinding("independent", "cuda")
    return binding, [binding.add_copy(group) for group in sets]


def check_dobench(goals: list[str], results: dict, key: str = "dobench", timeout_s: float = 600.0) -> None:
    """do_bench of every evaluated goal's timed shapes in one fresh process (not the eval's workers), whose
    torch.compile and Triton caches are the eval's baselines' (the same compiled baseline). `dobench_repeat` does it
    again in another fresh process: how far do_bench's own ratio moves between processes. A part named
    `dobench_split...` times the solution in one fresh process and the baseline in another, as the eval does: does
    do_bench's ratio then move between runs as much as the eval's? Each process is stopped after `timeout_s`, and
    the goals it finished are kept."""
    reports = {
        g: EvalReport.model_validate(results["evals"][g])
        for g in goals
        if g in results["evals"] and g not in results[key]
    }
    plan = {
        goal: {
            s.name: {
                "baseline": report.strongest_baseline[s.name],
                "input_sets": (s.memory or report.timing.params or TimingParams()).input_sets,
                "seeds": s.input_seeds,
                "graph_seeds": s.graph_seeds if s.timed_by == "graph" else [],
            }
            for s in report.shapes
            if s.name in report.strongest_baseline and (key not in VARIANT_ENV or s.timed_by == "graph")
        }
        for goal, report in reports.items()
    }
    plan = {goal: shapes for goal, shapes in plan.items() if shapes}
    if not plan:
        return
    env = cleared_env() if key == "dobench_cleared" else dict(os.environ)
    env |= VARIANT_ENV.get(key, {})
    cache = next(iter(reports.values())).environment.baseline_cache
    if cache:
        env |= baseline_env(Path(cache))
    if (bytecode := bytecode_dir()) is not None:
        env["PYTHONPYCACHEPREFIX"] = str(bytecode)  # what the baselines' processes compiled (trusted, as they are)
    measured: dict = {}
    finished = set(plan)
    roles = ("candidate", "baseline") if key.startswith("dobench_split") else (None,)
    for only in roles:
        args = [sys.executable, str(Path(__file__)), json.dumps(plan), *([only] if only else [])]
        part, problem = run_measuring(args, env, timeout_s)
        merge_measured(measured, part)
        finished &= set(part)
        if problem is not None:
            results["errors"] = results.get("errors", {}) | {key: problem}
            print(f"{key} HARNESS ERROR {problem[-300:]}", flush=True)
            if only != roles[-1]:
                finished = set()  # the other callable's process never ran: no goal has both
            break
    for goal in sorted(finished):
        agreement(goal, reports[goal], plan[goal], measured[goal], results, key)


def cleared_env() -> dict[str, str]:
    """The environment the eval gives its workers (jg_mcp/eval/processes/process.py: the variables of KEPT_ENV and a
    path), for the part `dobench_cleared`: does the host's environment (an allocator setting, say) move the independent
    measurement?"""
    from jg_mcp.eval.processes.process import KEPT_ENV

    env = {k: os.environ[k] for k in (*KEPT_ENV, "PATH", "PYTHONPATH", "HOME") if k in os.environ}
    return env | {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def agreement(goal: str, report: EvalReport, plan: dict, measured: dict, results: dict, key: str = "dobench") -> None:
    """The eval's speedup against do_bench's ratio at each timed shape of one goal. do_bench's ratio is that of each
    callable's median over its measurements (DOBENCH_ROUNDS rounds of two); `do_bench_order_pct` is how far the
    ratio measured with the solution first was from the one measured with the baseline first (what the order alone
    did). The `_iqm` fields compare the same way with both read as interquartile means."""
    rows = {}
    by_iqm = speedups(report, "iqm_ms")
    for shape, sp in speedups(report).items():
        runs, iqms = measured.get(shape, {}).get("median", {}), measured.get(shape, {}).get("iqm", {})
        base = report.strongest_baseline[shape]
        if "candidate" in runs and base in runs:
            cand, lib = runs["candidate"], runs[base]
            ratio = statistics.median(lib) / statistics.median(cand)
            rows[shape] = {
                "eval_speedup": sp,
                "do_bench_ratio": ratio,
                "agreement_pct": 100 * (sp / ratio - 1),
                "do_bench_ms": {"candidate": statistics.median(cand), base: statistics.median(lib)},
                "do_bench_runs_ms": runs,
                "do_bench_order_pct": 100 * ((lib[0] / cand[0]) / (lib[-1] / cand[-1]) - 1),
                "measured_by": "graph" if plan[shape].get("graph_seeds") else "do_bench",
            }
            for series in ("graph_burst", *(f"graph_{way}{q}" for way in RENEWALS for q in ("", "_q10", "_q90"))):
                if series in measured[shape]:
                    rows[shape][f"{series}_runs_ms"] = measured[shape][series]
            rows[shape] |= per_cycle(report, shape, base, sp, ratio, measured[shape].get("mhz", {}))
            if shape in by_iqm:
                ratio = statistics.median(iqms[base]) / statistics.median(iqms["candidate"])
                rows[shape] |= {
                    "eval_speedup_iqm": by_iqm[shape],
                    "do_bench_ratio_iqm": ratio,
                    "agreement_iqm_pct": 100 * (by_iqm[shape] / ratio - 1),
                    "do_bench_iqm_runs_ms": iqms,
                }
    results[key][goal] = rows
    worst = max((abs(r["agreement_pct"]) for r in rows.values()), default=0.0)
    print(
        f"{key} {goal:20s} worst |eval/do_bench - 1| {worst:5.1f}%  "
        + " ".join(f"{k}:{r['agreement_pct']:+.1f}% (order {r['do_bench_order_pct']:+.1f}%)" for k, r in rows.items()),
        flush=True,
    )


def per_cycle(report: EvalReport, shape: str, base: str, speedup: float, ratio: float, mhz: dict) -> dict:
    """The agreement with every time read in SM clock cycles (time times the callable's median SM clock, the
    eval's over its timed blocks, do_bench's over its calls), where every clock is known: on a power-capped GPU a
    callable's clock follows the power drawn before and during its calls, which differs between the eval's blocks
    and do_bench's 125 ms runs; where the two agree per cycle and not per millisecond, what parts them is the clock
    each ran at, not the count of the work."""
    s = next(x for x in report.shapes if x.name == shape)
    timed = s.baselines.get(base)
    cand, lib = s.candidate and s.candidate.clocks, timed and timed.clocks
    db = {n: [v for v in mhz.get(n, []) if v] for n in ("candidate", base)}
    if not cand or not lib or not all(db.values()):
        return {}
    eval_c, eval_b = cand.sm_mhz_median, lib.sm_mhz_median
    db_c, db_b = (statistics.mean(db[n]) for n in ("candidate", base))
    eval_cycles, db_cycles = speedup * eval_b / eval_c, ratio * db_b / db_c
    return {
        "eval_mhz": {"candidate": eval_c, base: eval_b},
        "do_bench_mhz": {"candidate": db_c, base: db_b},
        "agreement_cycles_pct": 100 * (eval_cycles / db_cycles - 1),
    }


if __name__ == "__main__":
    dobench_all(json.loads(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
