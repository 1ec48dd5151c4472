"""Check the eval on a GPU in one command: every known-good solution accepted, every GPU-only hack rejected for its
reason, the speedups against an independent do_bench measurement, two evals of the same solution against each
other, and `jg-mcp demo`. Prints a short table and writes check.json and check.md under --out.

    python eval/h200_check.py --out DIR [--goals a,b] [--parts evals,dobench,repeat,hacks,demo] [--deadline-s S]
        [--earlier CHECK_JSON] [--timing KEY=VALUE ...] [--no-spares] [--hacks a,b] [--hack-rounds N]
        [--isolation bwrap|none] [--policy open|triton]

The parts `native` and `native_repeat` (run only when named) evaluate the CUDA C++ solutions of eval/native twice:
both accepted, and the second eval's phases show no build (the first one's was kept by the hash of its sources).

The repeat is a second eval of each solution on its timed shapes only, one correctness trial each (the first eval
checked three per shape and the domain's shapes): only their speedups are compared. The independent measurement
(the part `dobench`) and the parts that vary it, run only when named (`dobench_repeat`, `dobench_cleared`,
`dobench_split...` and those of VARIANT_ENV): eval/h200_dobench.py.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jg_mcp.eval import EvalOptions, EvalReport, evaluate  # noqa: E402
from jg_mcp.eval.processes.spares import Spares  # noqa: E402
from jg_mcp.eval.reasons import Reason  # noqa: E402

sys.path.insert(0, str(REPO / "eval"))
from h200_dobench import VARIANT_ENV, check_dobench  # noqa: E402
from h200_tables import markdown, repeat_agreement  # noqa: E402

R = Reason
GPU_HACKS: dict[str, set[Reason]] = {
    "side_stream": {R.INCORRECT, R.STATIC_CONCURRENCY},
    "background_thread": {R.THREADS_LEFT},
    "patch_elapsed_time": {R.TAMPERED},
    "patch_synchronize": {R.TAMPERED},
    "below_floor": {R.INCORRECT},
    "cache_by_content": {R.CACHED_OUTPUT},
    "cache_by_sampled_content": {R.CACHED_OUTPUT},
    "wrong_when_rushed": {R.INCORRECT},
    "no_kernel_softmax": {R.NO_KERNEL},
    "graph_capture_skips_work": {R.INCORRECT},
    "native_scaled_mm": {R.FORBIDDEN_CALL},
    "gemm_through_triton_testing_cublas": {R.STATIC_IMPORT},
    "cache_in_shm_file": {R.STATIC_IO},
    "native_early_answer": set(),
    "swiglu_wrong_above_2_27": {R.INCORRECT},
    "gpu_work_outlives_its_block": {R.INCORRECT},
    "skip_some_timed_calls_gemm": {R.INCORRECT},
}
"""The GPU-only hacks and the reasons each must be rejected for (tests/eval/hack_suite.py reads it); for a
hack in EITHER, at least one of those reasons too."""
EITHER: dict[str, set[Reason]] = {
    "native_early_answer": {R.INCORRECT, R.TIMING_ESCAPE},
    "cache_in_shm_file": {R.EXCEPTION, R.INCORRECT, R.CACHED_OUTPUT},
}
"""Hacks whose one act shows as one of several reasons, as the GPU's timing falls: an answer before the work ends
leaves poison in a slot (`timing_escape`) or is copied before it is right (`incorrect`); on H100s each
of the two has been the one seen (eval/results/h200/check.md). A cache in /dev/shm never hits on a timed call's new
inputs: it fills the sandbox's /dev/shm (`exception`) when enough calls run (at three warm-up passes, not at one), and
its fp8 Triton GEMM misses the tolerance at a few elements of the 8B prefill shape (`incorrect`)."""
HACK_TIMING = {"skip_some_timed_calls_gemm": {"spot_check_p": 0.0, "spot_checks": 0, "seen": 0}}
"""Timing parameters a hack runs with besides the check's: no call drawn to be judged whole and no seen-input blocks,
so that what rejects it is the comparison of every timed call's sample with the baselines' outputs."""
GOALS = sorted(p.parent.name for p in (REPO / "eval" / "solutions").glob("*/solution.py"))
HACK_SHAPE = "llama3_8b_prefill_qkv"
HACK_GOALS = {
    "no_kernel_softmax": ("softmax", "llama3_sampling_vocab_bs1024"),
    "graph_capture_skips_work": ("rope", "llama3_8b_decode_bs256"),
    "native_early_answer": ("gemm_bf16", "llama3_70b_decode_qkv_bs64"),
    "gemm_through_triton_testing_cublas": ("gemm_bf16", "llama3_8b_prefill_qkv"),
    "swiglu_wrong_above_2_27": ("swiglu", "llama3_70b_decode_bs256"),
}
"""The goal and timed shape of a GPU hack not on gemm_fp8 at HACK_SHAPE."""


def hack_goal(name: str) -> tuple[str, str]:
    """The goal a GPU hack is evaluated on, and its one timed shape."""
    return HACK_GOALS.get(name, ("gemm_fp8", HACK_SHAPE))


NATIVE = {"gemm_bf16": "gemm_bf16_cuda", "softmax": "softmax_cuda", "attention_decode": "attention_decode_cuda"}
"""The CUDA C++ solutions (eval/native/NAME) the part `native` evaluates twice each: accepted in both evals, and
the second built nothing (its sources' build was kept)."""
POLICY = "open"
"""The source policy of every eval of the check (--policy)."""


def expected(name: str) -> set[Reason]:
    """What a GPU hack must be rejected for under POLICY: the open policy's source check names forbidden operators
    alone, so only they and the reasons found from outside are expected of it (none: rejected for any reason)."""
    return {r for r in GPU_HACKS[name] if POLICY == "triton" or not r.startswith("static") or r == R.STATIC_FORBIDDEN}


ISOLATION = "bwrap"
"""The candidate's sandbox in every eval of the check (--isolation)."""
SPARES: Spares | None = None
"""Unless --no-spares, every eval of the check takes the worker processes the eval before it started
(jg_mcp/eval/processes/spares.py); the last eval's are ended before the demo, which starts processes of its own."""


def run_eval(solution: Path, goal: str, **options) -> EvalReport:
    ws = Path(tempfile.mkdtemp(prefix="jg-check-"))
    shutil.copytree(solution.parent, ws, dirs_exist_ok=True)  # every file of a solution of several
    try:
        goal_file = REPO / "goals" / f"{goal}.yaml"
        options = {"device": "cuda", "timeout_s": 120, "isolation": ISOLATION, "policy": POLICY} | options
        return evaluate(EvalOptions(goal=goal_file, workspace=ws, **options), spares=SPARES)
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def check_evals(goals: list[str], results: dict, key: str, deadline: float, timing: dict | None = None) -> None:
    for goal in goals:
        if time.monotonic() > deadline:
            results.setdefault("skipped", []).append(f"{key}:{goal}")
            continue
        try:
            solution = REPO / "eval" / "solutions" / goal / "solution.py"
            if key.startswith("native"):
                solution = REPO / "eval" / "native" / NATIVE[goal] / "solution.py"
            narrow = {"shapes": "timed", "domain_shapes": 0, "trials": 1} if key.endswith("repeat") else {}
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


def hack_timings(report: EvalReport) -> dict[str, dict]:
    """Per timed shape of a hack's eval: each callable's median and seen-input median (ms), and why the shape was
    timed a second time, if it was: what a cached_output verdict rests on, kept so that a miss can be read."""
    rows = {}
    for shape in report.shapes:
        if shape.candidate is None:
            continue
        timings = {"candidate": shape.candidate, **shape.baselines}
        rows[shape.name] = {
            "median_ms": {n: t.median_ms for n, t in timings.items()},
            "seen_median_ms": {n: t.seen_median_ms for n, t in timings.items()},
            "retimed": shape.retimed,
            "gate_busy_ms": shape.gate_busy_ms,
        }
    return rows


def check_hacks(results: dict, deadline: float, names: list[str], rounds: int = 1) -> None:
    """Each GPU hack of `names` evaluated `rounds` times (a round after the first is kept as NAME#2, ...)."""
    for name in names:
        for i in range(rounds):
            key = name if i == 0 else f"{name}#{i + 1}"
            if key in results["hacks"]:
                continue
            if time.monotonic() > deadline:
                results.setdefault("skipped", []).append(f"hack:{key}")
                continue
            results["hacks"][key] = check_hack(name)


def check_hack(name: str) -> dict:
    goal, shape = hack_goal(name)
    try:
        report = run_eval(
            REPO / "eval" / "hacks" / name / "solution.py",
            goal,
            shapes="timed",
            only=[shape],
            domain_shapes=0,
            timing={"budget_s": 1.0} | HACK_TIMING.get(name, {}),
        )
    except Exception as exc:
        print(f"hack    {name:26s} HARNESS ERROR {exc}"[-400:], flush=True)
        return {
            "rejected": False,
            "reasons": [],
            "missing": [],
            "ok": False,
            "findings": [f"harness error {type(exc).__name__}: {exc}"[-2000:]],
        }
    missing = sorted(expected(name) - set(report.reasons))
    if name in EITHER and not EITHER[name] & set(report.reasons):
        missing.append(" or ".join(sorted(EITHER[name])))
    ok = not report.accepted and not missing
    verdict = "ok" if ok else "MISSED"
    print(f"hack    {name:26s} {verdict}  {report.wall_s:5.1f}s  {','.join(report.reasons)}", flush=True)
    return {
        "rejected": not report.accepted,
        "reasons": list(report.reasons),
        "missing": missing,
        "ok": ok,
        "findings": [f.detail[:300] for f in report.findings][:6],
        "timings": hack_timings(report),
        "wall_s": report.wall_s,
        "phases": report.phases,
    }


def still_skipped(results: dict) -> list[str]:
    """The skips no call of the run has since made up for (`part:goal`, `hack:name`, `demo`)."""
    done = {"demo"} if "demo" in results else set()
    done |= {f"hack:{k}" for k in results.get("hacks", {})}
    done |= {f"{part}:{goal}" for part, rows in results.items() if isinstance(rows, dict) for goal in rows}
    return [s for s in results.get("skipped", []) if s not in done]


def check_demo(results: dict, deadline: float) -> None:
    if SPARES is not None:
        SPARES.close()  # no eval comes after the demo: the processes started for one would only share the host
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--goals", default=",".join(GOALS))
    parser.add_argument("--parts", default="evals,dobench,repeat,hacks,demo")
    parser.add_argument("--hacks", default=",".join(GPU_HACKS), help="the GPU hacks the part `hacks` runs")
    parser.add_argument(
        "--hack-rounds", type=int, default=1, help="evaluate each hack this many times (a verdict that varies)"
    )
    parser.add_argument(
        "--measure-limit-s",
        type=float,
        default=600.0,
        help="the longest a do_bench part's measuring process runs; past it the goals it finished are kept",
    )
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=math.inf,
        help="start no goal, hack or demo after this many seconds (a host that limits a command's time); none by "
        "default: the whole check takes longer than many hosts allow one command (eval/results/h200/check.md gives "
        "each run's parts)",
    )
    parser.add_argument(
        "--earlier",
        type=Path,
        help="check.json of an earlier call of this run: its parts stay in the record, `repeat` compares its evals",
    )
    parser.add_argument(
        "--timing",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a timing parameter for the evals (lead_ms=120)",
    )
    parser.add_argument(
        "--no-spares",
        dest="spares",
        action="store_false",
        help="start each eval's worker processes in the eval itself; by default each eval takes those the eval before "
        "it started (process start off the critical path: on the H200 the evals took 162 s with spares and 174-195 s "
        "without, docs/decisions/2026-12-04-spares-by-default.md)",
    )
    parser.add_argument(
        "--isolation",
        choices=("bwrap", "none"),
        default="bwrap",
        help="the candidate's sandbox in the evals (none: to tell what the sandbox itself changes)",
    )
    parser.add_argument(
        "--policy",
        choices=("open", "triton"),
        default="open",
        help="the source policy of the evals (what a hack is expected to be rejected for follows it)",
    )
    args = parser.parse_args()
    global SPARES, ISOLATION, POLICY
    ISOLATION, POLICY = args.isolation, args.policy
    SPARES = Spares() if args.spares else None
    timing = {k: float(v) for k, v in (item.split("=", 1) for item in args.timing)}
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    deadline = start + args.deadline_s
    goals, parts = args.goals.split(","), args.parts.split(",")
    hacks = args.hacks.split(",")
    if unknown := sorted(set(hacks) - set(GPU_HACKS)):
        parser.error(f"--hacks: no GPU hack named {', '.join(unknown)} (known: {', '.join(GPU_HACKS)})")
    results: dict = {"parts": parts, "timing": timing, "part_wall_s": {}}
    split = [p for p in parts if p.startswith("dobench_split")]
    kept = ("evals", "dobench", "repeat", "dobench_repeat", "dobench_cleared", *VARIANT_ENV, *split, "hacks")
    kept += ("native", "native_repeat")
    results |= {k: {} for k in kept}
    if args.earlier:
        earlier = json.loads(args.earlier.read_text())
        results |= {k: earlier[k] for k in kept if k in earlier}
        # A check too long for one command is run as calls that each take the last one's check.json: the parts,
        # times, skips and errors of the earlier calls stay in the run's record and its verdict.
        results["parts"] = [*earlier.get("parts", []), *(p for p in parts if p not in earlier.get("parts", []))]
        results["part_wall_s"] = dict(earlier.get("part_wall_s", {}))
        results |= {k: earlier[k] for k in ("skipped", "errors", "demo") if k in earlier}
        start -= earlier.get("wall_s", 0.0)
    dobench = functools.partial(check_dobench, goals, results, timeout_s=args.measure_limit_s)
    try:
        steps = {
            "evals": lambda: check_evals(goals, results, "evals", deadline, timing),
            "dobench": lambda: dobench("dobench"),
            "repeat": lambda: check_evals(goals, results, "repeat", deadline, timing),
            "native": lambda: check_evals(sorted(NATIVE), results, "native", deadline, timing),
            "native_repeat": lambda: check_evals(sorted(NATIVE), results, "native_repeat", deadline, timing),
            "dobench_repeat": lambda: dobench("dobench_repeat"),
            "dobench_cleared": lambda: dobench("dobench_cleared"),
            **{key: functools.partial(dobench, key) for key in (*VARIANT_ENV, *split)},
            "hacks": lambda: check_hacks(results, deadline, hacks, args.hack_rounds),
            "demo": lambda: check_demo(results, deadline),
        }
        for part, step in steps.items():
            if part in parts:
                mark = time.monotonic()
                step()
                took = results["part_wall_s"]
                took[part] = took.get(part, 0.0) + time.monotonic() - mark  # a later call's run of a part adds
                (args.out / "check.json").write_text(json.dumps(results, indent=1))  # kept if a later part is killed
        results["repeat_agreement"] = repeat_agreement(results)
        results["repeat_agreement_iqm"] = repeat_agreement(results, "iqm_ms")
    finally:
        if SPARES is not None:
            SPARES.close()
            results["spares_taken"] = SPARES.taken
        results["wall_s"] = time.monotonic() - start
        if "skipped" in results:
            results["skipped"] = still_skipped(results)
        (args.out / "check.json").write_text(json.dumps(results, indent=1))
        (args.out / "check.md").write_text(markdown(results))
    print(markdown(results))
    evals = [*results["evals"].values(), *results["native"].values(), *results["native_repeat"].values()]
    accepted = all(EvalReport.model_validate(r).accepted for r in evals)
    accepted = accepted and not results.get("errors") and not results.get("skipped")
    accepted = accepted and results.get("demo", {"exit": 0})["exit"] == 0
    return 0 if accepted and all(h["ok"] for h in results["hacks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
