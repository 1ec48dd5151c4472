"""Does torch.compile's first-run autotuning decide a compiled baseline's time? On a GPU, each of `--processes`
fresh processes per mode compiles the goals' `compiled` baselines into a cache directory of its own (so each
autotunes anew), at the named shapes, then times the baseline and the known-good solution with the check's
do_bench (eval/h200_check.py: the calls rotating over three input sets, the eval's pad after each L2 flush). Modes:
`default` (Inductor's defaults: pointwise kernels pick one of their configs by a benchmark at their first run) and
`fixed` (`torch._inductor.config.triton.autotune_pointwise = False`: Inductor's first config, no benchmark).
Prints one row per process and mode with the configs Inductor kept (its `.best_config` files), and writes
autotune.json under --out.

    python eval/autotune_probe.py --out DIR [--shapes goal:shape:pad_ms,...] [--processes N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "eval"))

SHAPES = (
    "swiglu:llama3_70b_decode_bs256:0.19,swiglu:qwen3_30b_a3b_expert_rows_4k_tokens_top8:0.27,"
    "rope:llama3_8b_decode_bs256:0.5,rope:llama3_70b_decode_bs1024:0.44"
)


def measure(shapes: list[tuple[str, str, float]], mode: str) -> dict:
    """In this fresh process: each shape's compiled baseline (compiled here) and solution, timed by do_bench."""
    import torch

    if mode == "fixed":
        import torch._inductor.config as inductor_config

        inductor_config.triton.autotune_pointwise = False
    from h200_dobench import known_good

    from jg_mcp.eval.worker_commands import padded_do_bench

    out = {}
    for goal_name, shape_name, pad in shapes:
        goal, kernel = known_good(goal_name)
        shape = next(s for s in goal.goal.shapes if s.name == shape_name)
        sets = [list(goal.make_inputs(shape.dims, seed, "cuda")) for seed in range(3)]
        base = goal.baseline("compiled")
        base(*sets[0])
        torch.cuda.synchronize()
        order = (("solution", kernel), ("compiled", base), ("compiled_again", base), ("solution_again", kernel))
        out[f"{goal_name}:{shape_name}"] = {n: statistics.median(padded_do_bench(f, sets, pad)) for n, f in order}
        del sets
        torch.cuda.empty_cache()
    return out


def best_configs(cache: Path) -> list[str]:
    """The configs Inductor kept in `cache`, as short text (block sizes and warps)."""
    found = []
    for path in sorted(cache.rglob("*.best_config")):
        config = json.loads(path.read_text())
        found.append(",".join(f"{k}={v}" for k, v in sorted(config.items()) if k[0].isupper() or k == "num_warps"))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shapes", default=SHAPES, help="goal:shape:pad_ms, comma-separated")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    shapes = [(g, s, float(p)) for g, s, p in (item.split(":") for item in args.shapes.split(","))]
    if args.child:
        print(json.dumps(measure(shapes, args.child)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for index in range(args.processes):
        for mode in ("default", "fixed"):
            with tempfile.TemporaryDirectory() as tmp:
                env = os.environ | {"TORCHINDUCTOR_CACHE_DIR": f"{tmp}/inductor", "TRITON_CACHE_DIR": f"{tmp}/triton"}
                argv = [sys.executable, __file__, "--out", str(args.out), "--shapes", args.shapes, "--child", mode]
                done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
                if done.returncode != 0:
                    print(f"{mode} {index} failed: {done.stderr[-2000:]}", flush=True)
                    continue
                times = json.loads(done.stdout.strip().splitlines()[-1])
                rows.append({"mode": mode, "process": index, "times": times, "configs": best_configs(Path(tmp))})
            for shape, t in rows[-1]["times"].items():
                base = (t["compiled"] + t["compiled_again"]) / 2
                sol = (t["solution"] + t["solution_again"]) / 2
                print(f"{mode:8s} {index} {shape:52s} compiled {base:.5f} solution {sol:.5f} ratio {base / sol:.3f}")
            print(f"{mode:8s} {index} configs {rows[-1]['configs']}", flush=True)
            (args.out / "autotune.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
