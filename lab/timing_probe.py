"""Where the eval's time of a callable and do_bench's differ: one shape, one callable, measured several ways that
each change one thing, on one GPU in one run. Prints a table and writes probe.json under --out.

    python lab/timing_probe.py --out DIR [--shapes GOAL:SHAPE,...] [--repeats N] [--variants V,...] [--processes N]

Per shape it runs the eval (that shape only, with the eval's own do_bench of each baseline in the baseline
process, on one input set in the harness's shared buffers), then, in `--processes` fresh processes one after
another on the baselines' compile cache, each callable under each of these (or the `--variants` named), every one
`--repeats` times in a random order (what ran before a measurement is part of it at these sizes, so the spread of
the repeats is reported with the median):
- `db1`: triton.testing.do_bench on one set of fresh torch tensors (what eval/h200_check.py compares with);
- `db3`: the same, the calls rotating over three input sets;
- `db1_dedicated`: one set, each tensor in its own cudaMalloc allocation, as the harness allocates them;
- `db1_moved`: `db1` with its inputs, outputs and flush buffer in other memory at each repeat (its spread against
  `db1`'s: does where the buffers land move a time as much as another process does?);
- `loop1`, `loop3`: the eval's blocks (a lead block, then a timed block; flush, pad, events, outputs copied to a
  ring) on one set or rotating over three;
- `loop1_int32`: `loop1` flushing with do_bench's int32 buffer instead of the eval's uint8 one;
- `loop1_nolead`: `loop1` without lead blocks;
- `loop1_hold`: `loop1` keeping each call's output until the next call returns, as the eval's worker did through
  commit caff047 (each call's output then lands in other memory than the previous one's; do_bench drops it);
- `graph_rot`: device time per call in one CUDA graph of calls rotating over K input sets (seeds 1..K, the fewest,
  3 to 512, whose calls move 256 MiB together by the goal's bytes per call), replayed 10 times (median): no flush
  and no pad, each set leaves the L2 (50 MB) before it is read again and the graph hides the launches;
- `graph_warm`: triton.testing.do_bench_cudagraph on one set (warm L2, no flush: a reference only).
A variant that raises (a callable a CUDA graph cannot capture) records None and its error under `errors`. With
more than one process it prints, per shape and variant, the spread over the processes of each callable's time and
of each baseline/candidate ratio, and each ratio (median over the processes) beside the eval's.
It also times each process's start (torch import, CUDA, goal) and each callable's first call at each shape
(compilation), and what sharing buffers over CUDA IPC costs (allocate and export here, open in a child).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "lab"), str(REPO / "eval")]

from independent_graph import graph_times  # noqa: E402
from timing_probe_tables import agreement, spreads, table  # noqa: E402

DEFAULT = (
    "fused_add_rmsnorm:llama3_70b_decode_bs256,rope:llama3_8b_decode_bs256,rope:llama3_70b_decode_bs1024,"
    "softmax:llama3_sampling_vocab_bs64,swiglu:llama3_70b_decode_bs256"
)
VARIANTS = (
    "db1",
    "db3",
    "db1_dedicated",
    "db1_moved",
    "loop1",
    "loop1_int32",
    "loop1_nolead",
    "loop1_hold",
    "loop3",
    "graph_rot",
    "graph_warm",
)


def eval_side(plan: dict[str, list[str]]) -> dict:
    from h200_check import run_eval

    out: dict = {}
    for goal, shapes in plan.items():
        report = run_eval(
            REPO / "eval" / "solutions" / goal / "solution.py",
            goal,
            shapes="timed",
            only=shapes,
            domain_shapes=0,
            do_bench=True,
        )
        out[goal] = {
            "accepted": report.accepted,
            "reasons": list(report.reasons),
            "phases": report.phases,
            "shapes": {},
        }
        for s in report.shapes:
            if s.kind != "timed" or s.candidate is None:
                continue
            rows = {"candidate": s.candidate, **s.baselines}
            out[goal]["shapes"][s.name] = {
                "pad_ms": s.pad_ms,
                **{
                    n: {"eval": t.median_ms, "seen": t.seen_median_ms, "ipc_db1": t.do_bench_ms}
                    for n, t in rows.items()
                },
            }
    return out


def db(fn, sets: list[list], pad_ms: float) -> float:
    """do_bench's median (jg_mcp.eval.candidate.worker_commands.padded_do_bench)."""
    from jg_mcp.eval.candidate.worker_commands import padded_do_bench

    return statistics.median(padded_do_bench(fn, sets, pad_ms))


def moved(fn, sets: list[list], pad_ms: float) -> float:
    """`db` on copies of `sets` made after the allocator gave its free memory back and a block of a random size
    (1 MiB-4 GiB) was taken: the inputs, the outputs and do_bench's flush buffer land in other memory each time, as
    they do in another process (is where they land what moves a time between processes?)."""
    import torch

    torch.cuda.empty_cache()
    hold = torch.empty(random.randint(1, 4096) << 20, dtype=torch.uint8, device="cuda")
    copies = [[t.clone() for t in s] for s in sets]
    try:
        return db(fn, copies, pad_ms)
    finally:
        del hold, copies


def loop(fn, sets: list[list], pad_ms: float, rounds: int, flush, lead: bool = True, hold: bool = False) -> float:
    """The eval's blocks, in this process: per round a lead block (~lead_ms, times unused; none when `lead` is
    False), then a timed block (~block_ms) of calls rotating over `sets`, each after a flush and the pad, its
    output copied to a ring and dropped before the next call (with `hold`, kept until the next call returns, as
    the eval's worker did through commit caff047: each call's output then lands in other memory than the
    previous one's)."""
    import torch

    from jg_mcp.eval.candidate.worker_commands import PAD_CYCLES_PER_MS
    from jg_mcp.eval.options import TimingParams

    p = TimingParams()
    pad = int(pad_ms * PAD_CYCLES_PER_MS)
    slots: list = []
    turn = itertools.count()

    def calls(n: int, keep: bool) -> list[float]:
        marks: list = []
        kept: list = []
        for i in range(n):
            s = sets[next(turn) % len(sets)]
            flush.zero_()
            if pad:
                torch.cuda._sleep(pad)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn(*s)
            end.record()
            marks.append((start, end))
            outs = out if isinstance(out, (tuple, list)) else [out]
            if keep:
                if len(slots) <= i:
                    slots.append([o.clone() for o in outs])
                for dst, o in zip(slots[i], outs, strict=False):
                    dst.copy_(o)
            kept[:] = [out] if hold else []
            del out, outs
        torch.cuda.synchronize()
        return [a.elapsed_time(b) for a, b in marks]

    est = statistics.median(calls(3 * len(sets), False)) + pad_ms
    leads = min(1024, math.ceil(p.lead_ms / est)) if lead else 0
    block = max(1, min(p.max_block, math.ceil(p.block_ms / est)))
    times: list[float] = []
    for _ in range(rounds):
        calls(leads, False)
        times += calls(block, True)
    return statistics.median(times)


def dedicated(tensors: list) -> tuple[object, list]:
    from jg_mcp.eval.wire.buffers import SharedBinding

    binding = SharedBinding("probe", "cuda")
    return binding, binding.add_copy(tensors)


def rotation(goal, dims: dict[str, int], floor: int = 256 << 20, most: int = 512) -> list[list]:
    """Input sets from seeds 1, 2, ...: the fewest (3 to `most`) whose calls move `floor` bytes together (the goal's
    bytes per call, not the sets' size: rope's 64 MiB cos/sin table is read 256 rows at a time), so a set is out of
    L2 (50 MB) before its next call."""
    count = min(most, max(3, math.ceil(floor / max(1.0, goal.bytes(dims)))))
    return [list(goal.make_inputs(dims, seed, "cuda")) for seed in range(1, count + 1)]


def graph_rot(fn, sets: list[list], replays: int = 10) -> float:
    """The median of `graph_times` without warm-up (what the probe of run 9 measured)."""
    return statistics.median(graph_times(fn, sets, replays, warmup_ms=0.0, rep_ms=0.0))


def graph_warm(fn, inputs: list) -> float:
    """triton.testing.do_bench_cudagraph's median on one input set (warm L2, no flush)."""
    import triton.testing

    return float(triton.testing.do_bench_cudagraph(lambda: fn(*inputs), rep=20, return_mode="median"))


def tolerant(measure: Callable[[], float], errors: dict[str, str], key: str) -> float | None:
    """`measure()`, or None with its error under `errors[key]` (a CUDA graph cannot capture every callable)."""
    try:
        return measure()
    except Exception as e:
        errors[key] = f"{type(e).__name__}: {e}"[:500]
        return None


def process_side(plan: dict[str, dict[str, float]], started: float, repeats: int, chosen: list[str]) -> dict:
    """In a fresh process: the `chosen` variants of every callable at every shape of `plan` (goal -> shape -> pad)."""
    t0 = time.monotonic()
    import torch

    t1 = time.monotonic()
    torch.cuda.init()
    torch.empty(1, device="cuda")
    t2 = time.monotonic()
    import triton  # noqa: F401

    import jg_mcp.eval.candidate.worker  # noqa: F401

    t3 = time.monotonic()
    from h200_check import known_good

    result: dict = {
        "start_s": {
            "python_to_main": t0 - started,
            "import_torch": t1 - t0,
            "cuda_init": t2 - t1,
            "import_triton_jg": t3 - t2,
        },
        "first_call_s": {},
        "shapes": {},
        "errors": {},
    }
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    flush32 = torch.empty(64 << 20, dtype=torch.int32, device="cuda")
    for goal_name, shapes in plan.items():
        a = time.monotonic()
        goal, kernel = known_good(goal_name)
        fns = {"candidate": kernel}
        fns |= {n: goal.baseline(n) for n, b in goal.goal.baselines.items() if "cuda" in b.devices}
        result["first_call_s"][goal_name] = {"load": time.monotonic() - a}
        by_name = {s.name: s for s in goal.goal.shapes}
        for shape, pad in shapes.items():
            key = f"{goal_name}:{shape}"
            sets = [list(goal.make_inputs(by_name[shape].dims, seed, "cuda")) for seed in (1, 2, 3)]
            rot = rotation(goal, by_name[shape].dims) if "graph_rot" in chosen else []
            firsts = {}
            for name, fn in fns.items():
                a = time.monotonic()
                fn(*sets[0])
                torch.cuda.synchronize()
                firsts[name] = time.monotonic() - a
            result["first_call_s"][goal_name][shape] = firsts
            binding, ded = dedicated(sets[0])
            variants: dict[tuple[str, str], Callable[[], float]] = {}
            for name, fn in fns.items():
                variants |= {
                    (name, "db1"): functools.partial(db, fn, sets[:1], pad),
                    (name, "db3"): functools.partial(db, fn, sets, pad),
                    (name, "db1_dedicated"): functools.partial(db, fn, [ded], pad),
                    (name, "db1_moved"): functools.partial(moved, fn, sets[:1], pad),
                    (name, "loop1"): functools.partial(loop, fn, sets[:1], pad, 6, flush),
                    (name, "loop1_int32"): functools.partial(loop, fn, sets[:1], pad, 6, flush32),
                    (name, "loop1_nolead"): functools.partial(loop, fn, sets[:1], pad, 6, flush, False),
                    (name, "loop1_hold"): functools.partial(loop, fn, sets[:1], pad, 6, flush, True, True),
                    (name, "loop3"): functools.partial(loop, fn, sets, pad, 6, flush),
                    (name, "graph_rot"): functools.partial(graph_rot, fn, rot),
                    (name, "graph_warm"): functools.partial(graph_warm, fn, sets[0]),
                }
            variants = {(n, v): m for (n, v), m in variants.items() if v in chosen}
            order = [pair for pair in variants for _ in range(repeats)]
            random.shuffle(order)
            rows: dict = {name: {v: [] for n, v in variants if n == name} for name in fns}
            for name, variant in order:
                value = tolerant(variants[name, variant], result["errors"], f"{key} {name} {variant}")
                rows[name][variant].append(value)
            binding.free()  # type: ignore[attr-defined]
            result["shapes"][key] = rows
    result["ipc"] = ipc_cost()
    return result


def ipc_cost(count: int = 128, nbytes: int = 1 << 20) -> dict:
    """Allocating and exporting `count` buffers here, opening and closing them in a child process."""
    import torch

    from jg_mcp.eval.wire.buffers import SharedBinding

    a = time.monotonic()
    binding = SharedBinding("ipc", "cuda")
    for _ in range(count):
        binding.add_group([torch.empty(nbytes, dtype=torch.uint8, device="cuda")])
    torch.cuda.synchronize()
    alloc = time.monotonic() - a
    child = (
        "import sys,time,json,torch; sys.path.insert(0, sys.argv[1]); torch.cuda.init(); torch.empty(1,device='cuda');"
        "from jg_mcp.eval.wire.messages import Bind; from jg_mcp.eval.wire.buffers import MappedBinding;"
        "b=Bind.model_validate_json(sys.stdin.read()); a=time.monotonic(); m=MappedBinding(b, []);"
        "o=time.monotonic()-a; a=time.monotonic(); m.close(); print(json.dumps([o, time.monotonic()-a]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", child, str(REPO)],
        input=binding.message().model_dump_json(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    a = time.monotonic()
    binding.free()
    free = time.monotonic() - a
    opened = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else [None, None]
    return {
        "buffers": count,
        "alloc_export_ms_each": 1e3 * alloc / count,
        "open_ms_each": opened[0] and 1e3 * opened[0] / count,
        "close_ms_each": opened[1] and 1e3 * opened[1] / count,
        "free_ms_each": 1e3 * free / count,
        "child_error": done.stderr[-500:] if done.returncode else None,
    }


def child(plan: dict, repeats: int, variants: str, env: dict[str, str]) -> dict | str:
    """One `--process` run in a fresh process (400 s at most): its result, or the end of its stderr."""
    argv = [sys.executable, str(Path(__file__)), "--process", json.dumps(plan), str(time.monotonic()), str(repeats)]
    try:
        done = subprocess.run([*argv, variants], capture_output=True, text=True, timeout=400, env=env)
    except subprocess.TimeoutExpired:
        return "the process ran past 400 s"
    return json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else done.stderr[-3000:]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--process":
        chosen = sys.argv[5].split(",") if len(sys.argv) > 5 else list(VARIANTS)
        print(json.dumps(process_side(json.loads(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), chosen)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shapes", default=DEFAULT)
    parser.add_argument("--repeats", type=int, default=3, help="measurements of each variant, in a random order")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, of: " + ",".join(VARIANTS))
    parser.add_argument("--processes", type=int, default=1, help="fresh processes measuring them, one after another")
    args = parser.parse_args()
    unknown = set(args.variants.split(",")) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants: {','.join(sorted(unknown))}")
    args.out.mkdir(parents=True, exist_ok=True)
    wanted: dict[str, list[str]] = {}
    for item in args.shapes.split(","):
        goal, shape = item.split(":")
        wanted.setdefault(goal, []).append(shape)
    results: dict = {"evals": eval_side(wanted)}
    plan = {g: {s: v["pad_ms"] for s, v in r["shapes"].items()} for g, r in results["evals"].items()}
    import torch
    import triton

    from jg_mcp.eval.processes.compile_cache import baseline_dir, baseline_env

    cache, _ = baseline_dir(torch.__version__, triton.__version__, torch.cuda.get_device_name(), Path("/tmp/probe"))
    env = dict(os.environ) | baseline_env(cache)
    (args.out / "probe.json").write_text(json.dumps(results, indent=1, default=str))
    runs = []
    for i in range(args.processes):
        runs.append(child(plan, args.repeats, args.variants, env))
        (args.out / f"process{i}.json").write_text(json.dumps(runs[-1], indent=1, default=str))
    results["processes"] = [r for r in runs if isinstance(r, dict)]
    errors = [r for r in runs if isinstance(r, str)]
    if errors:
        results["process_errors"] = errors
        print(*errors, sep="\n")
    if results["processes"]:
        results["process"] = results["processes"][0]
        print(table(results["evals"], results["process"]))
        if len(results["processes"]) > 1:
            print("\n" + spreads(results["processes"]))
        print("\n" + agreement(results["evals"], results["processes"]))
        keys = ("start_s", "first_call_s", "ipc", "errors")
        print(json.dumps({k: results["process"][k] for k in keys}, indent=1))
    (args.out / "probe.json").write_text(json.dumps(results, indent=1, default=str))
    for goal, r in results["evals"].items():
        print(goal, r["accepted"], r["reasons"], {k: round(v, 2) for k, v in r["phases"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
