"""Does torch.compile's choice of kernel config, or where a process puts its tensors, decide a compiled baseline's
time? On a GPU, each of `--processes` fresh processes per mode compiles the named goals' `compiled` baselines
(each through the goal's own `baseline_compiled`), at the named shapes, then times the baseline, the eager
baseline named with it and the known-good solution with the check's do_bench (eval/h200_check.py: the calls
rotating over three input sets, the eval's pad after each L2 flush). Modes:

- `default`: the goal's torch.compile options alone, each process with an empty cache of its own (each compiles
  and autotunes anew);
- `fixed`: the same, with `torch._inductor.config.triton.autotune_pointwise = False` set for the whole process
  (what the goals now pass as an option; run before e9d1ec5 this was the only difference);
- `shared`: the goal's options, every process of the mode on one cache (the first compiles, the rest load it), as
  every eval and do_bench on one host does (jg_mcp/eval/processes/compile_cache.py);
- `filtered`: `shared`'s arrangement on a cache of its own, with Inductor's reduction configs filtered to one by
  its heuristic (`test_configs.force_filter_reduction_configs`, where this torch has it), no first-run benchmark.

Each process also records, for every Inductor Triton kernel it holds, the length of its `configs` list and its
launchers' configs (on torch 2.11 in run 61 the launcher lists came back empty, so which config ran is not
recorded), each input tensor's address modulo 2 MiB, and the baseline's time on each input set alone and on
copies of the sets placed after a 1 MiB + 4 KiB spacer. Prints one row per process and mode and writes
autotune.json under --out.

    python lab/autotune_probe.py --out DIR [--shapes goal:shape:pad_ms,...] [--processes N] [--modes a,b]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path[:0] = [str(REPO / "lab"), str(REPO / "eval")]

SHAPES = (
    "swiglu:llama3_70b_decode_bs256:0.19,swiglu:qwen3_30b_a3b_expert_rows_4k_tokens_top8:0.27,"
    "rope:llama3_8b_decode_bs256:0.5,rope:llama3_70b_decode_bs1024:0.44"
)
MODES = ("default", "fixed", "shared", "filtered")
EAGER = {"fused_add_rmsnorm": "eager_rms_norm"}
"""The eager baseline timed beside the compiled one, where a goal has one that holds steady between processes."""


def configure(mode: str) -> str | None:
    """Set this process's Inductor config for `mode`; what could not be set, if anything."""
    import torch._inductor.config as inductor_config

    if mode == "fixed":
        inductor_config.triton.autotune_pointwise = False
    if mode == "filtered":
        if not hasattr(inductor_config.test_configs, "force_filter_reduction_configs"):
            return "this torch has no test_configs.force_filter_reduction_configs"
        inductor_config.test_configs.force_filter_reduction_configs = True
    return None


def launched() -> dict[str, dict]:
    """Every Inductor Triton kernel this process holds: the length of its `configs` and its launchers' configs."""
    found = {}
    for obj in gc.get_objects():
        if type(obj).__name__ in ("CachingAutotuner", "DebugAutotuner") and hasattr(obj, "launchers"):
            name = getattr(getattr(obj, "fn", None), "__name__", "?")
            found[name] = {
                "configs": len(getattr(obj, "configs", []) or []),
                "launched": [str(launcher.config) for launcher in obj.launchers],
            }
    return found


def measure(shapes: list[tuple[str, str, float]], mode: str) -> dict:
    """In this fresh process: each shape's compiled baseline, eager baseline and solution, timed by do_bench."""
    import torch
    from h200_dobench import known_good

    from jg_mcp.eval.candidate.worker_commands import padded_do_bench

    out: dict = {"unset": configure(mode), "times": {}, "addresses": {}}
    for goal_name, shape_name, pad in shapes:
        goal, kernel = known_good(goal_name)
        shape = next(s for s in goal.goal.shapes if s.name == shape_name)
        sets = [list(goal.make_inputs(shape.dims, seed, "cuda")) for seed in range(3)]
        base = goal.baseline("compiled")
        base(*sets[0])
        torch.cuda.synchronize()
        order = [("solution", kernel), ("compiled", base), ("compiled_again", base), ("solution_again", kernel)]
        if goal_name in EAGER:
            order.insert(2, ("eager", goal.baseline(EAGER[goal_name])))
        key = f"{goal_name}:{shape_name}"
        times = {n: statistics.median(padded_do_bench(f, sets, pad)) for n, f in order}
        for i, one in enumerate(sets):
            times[f"compiled_set{i}"] = statistics.median(padded_do_bench(base, [one], pad))
        spacer = torch.empty((1 << 20) + 4096, dtype=torch.uint8, device="cuda")
        moved = [[t.clone() for t in one] for one in sets]
        times["compiled_moved"] = statistics.median(padded_do_bench(base, moved, pad))
        times["solution_moved"] = statistics.median(padded_do_bench(kernel, moved, pad))
        out["times"][key] = times
        out["addresses"][key] = [[t.data_ptr() % (2 << 20) for t in one] for one in sets + moved]
        del sets, moved, spacer
        torch.cuda.empty_cache()
    out["kernels"] = launched()
    return out


def child(args: argparse.Namespace, mode: str, cache: str) -> dict | str:
    """One fresh process's measurements, or why it failed."""
    env = os.environ | {"TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor", "TRITON_CACHE_DIR": f"{cache}/triton"}
    argv = [sys.executable, __file__, "--out", str(args.out), "--shapes", args.shapes, "--child", mode]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    except subprocess.TimeoutExpired:
        return "timed out after 300 s"
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr[-2000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shapes", default=SHAPES, help="goal:shape:pad_ms, comma-separated")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--modes", default="default,fixed", help=f"comma-separated, of {','.join(MODES)}")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    shapes = [(g, s, float(p)) for g, s, p in (item.split(":") for item in args.shapes.split(","))]
    if args.child:
        print(json.dumps(measure(shapes, args.child)))
        return
    modes = args.modes.split(",")
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes: {','.join(sorted(unknown))}")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as kept:
        for index in range(args.processes):
            for mode in modes:
                with tempfile.TemporaryDirectory() as tmp:
                    cache = f"{kept}/{mode}" if mode in ("shared", "filtered") else tmp
                    got = child(args, mode, cache)
                if isinstance(got, str):
                    print(f"{mode:8s} {index} failed: {got}", flush=True)
                    continue
                rows.append({"mode": mode, "process": index} | got)
                for shape, t in got["times"].items():
                    cells = " ".join(f"{k} {v * 1e3:.2f}" for k, v in t.items())
                    print(f"{mode:8s} {index} {shape} us: {cells}")
                kernels = {k: v["launched"] for k, v in got["kernels"].items()}
                print(f"{mode:8s} {index} kernels {kernels} unset {got['unset']}", flush=True)
                (args.out / "autotune.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
