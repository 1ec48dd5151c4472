"""Probes of the two states a CUDA graph's time takes (GPU only; eval/results/h200/check.md, stop 34). Run 41 timed
the same callable's graph twice in a row in one process, built by the same code (eval/independent_graph.py's
`graph_times`, then `graph_burst_times`), and got 4.79 then 5.49 us per call (rope's compiled baseline at
llama3_8b_decode_bs256), every time; run 40, in another process, got 5.57 for both. Each mode varies one thing in
one plain process, rope's 8b decode and softmax's bs64 shapes, the solution and the compiled baseline:

- default (`probe`, run 42): one graph per step, a spacer of 0 to 11 MiB allocated before each capture (the
  graph's outputs land elsewhere), its memory released after;
- `--alive` (`alive`, run 43): eight graphs of each callable captured and kept alive together, timed in turn;
- `--spin` (`spin_probe`, runs 44-46): one graph timed in turns with 0, 1 or 4 CPU-spinning processes and with and
  without the NVML sampler in the timed process;
- `--capture` (`capture_probe`, run 47): six graphs of each callable, captured plain, while the NVML
  sampler runs in the process (run 41's fast `graph_times` captures ran under it, its slow `graph_burst_times`
  captures did not) or while another process holds 40 GiB of GPU memory (the eval's harness holds its buffers
  before its workers capture), timed in turn twice.

Each prints one line per time and writes the rows as JSON with --out.

    python lab/offset_probe.py [--alive | --spin | --capture] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path[:0] = [str(REPO / "lab"), str(REPO / "eval")]

CASES = (("rope", "llama3_8b_decode_bs256", "compiled"), ("softmax", "llama3_sampling_vocab_bs64", "compiled"))
PADS = (0, 1 << 18, 1 << 19, 1 << 20, 3 << 19, 1 << 21, 3 << 20, 5 << 20, 7 << 20, 11 << 20)
PAGE = 1 << 21


def graph_inputs(goal_name: str, shape_name: str) -> tuple:
    """The goal, its known-good kernel, and the shape's graph input sets (seeds 0..K-1, K as the eval picks it),
    each tensor in an allocation of its own, with the binding that holds them."""
    from h200_dobench import dedicated, known_good

    from jg_mcp.eval.graphs import graph_sets

    goal, kernel = known_good(goal_name)
    shape = next(s for s in goal.goal.shapes if s.name == shape_name)
    n_sets = graph_sets(goal.bytes(shape.dims), 256 << 20)
    binding, own = dedicated([list(goal.make_inputs(shape.dims, seed, "cuda")) for seed in range(n_sets)])
    return goal, kernel, binding, own


def steady_us(graph, n: int, count: int) -> float:
    """Median time per call (us) over `count` timed replays of a graph of `n` calls, after 50 untimed ones."""
    from independent_graph import timed_replays

    for _ in range(50):
        graph.replay()
    return 1e3 * statistics.median(t / n for t in timed_replays(graph, count))


def probe(goal_name: str, shape_name: str, base: str) -> list[dict]:
    import torch
    from independent_graph import captured

    goal, kernel, binding, own = graph_inputs(goal_name, shape_name)
    rows = []
    for name, fn in (("candidate", kernel), (base, goal.baseline(base))):
        for pad in PADS * 2:
            spacer = torch.empty(max(pad, 1), dtype=torch.uint8, device="cuda")
            graph, n, kept = captured(fn, own, keep=True)
            first = kept[0][0] if isinstance(kept[0], (tuple, list)) else kept[0]
            us = steady_us(graph, n, 50)
            rows.append(
                {
                    "goal": goal_name,
                    "shape": shape_name,
                    "callable": name,
                    "pad": pad,
                    "us": us,
                    "output_offset": first.data_ptr() % PAGE,
                    "output_gap": first.data_ptr() - own[0][0].data_ptr(),
                    "input_offset": own[0][0].data_ptr() % PAGE,
                }
            )
            lands = rows[-1]["output_offset"]
            print(f"{goal_name:8s} {name:10s} pad {pad:>9d}  {rows[-1]['us']:7.3f} us  out@{lands:>8d}", flush=True)
            del spacer, graph, kept, first
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    binding.free()
    return rows


def alive(goal_name: str, shape_name: str, base: str, count: int = 8, spacer_mb: int = 0) -> list[dict]:
    """`count` graphs of each callable captured one after another and all kept alive (each its own memory pool,
    outputs and launch resources), then timed in turn, twice over: does the time belong to the capture?"""
    import torch
    from independent_graph import captured

    goal, kernel, binding, own = graph_inputs(goal_name, shape_name)
    rows = []
    for name, fn in (("candidate", kernel), (base, goal.baseline(base))):
        graphs, spacers = [], []
        for _ in range(count):
            graphs.append(captured(fn, own, keep=True))
            spacers.append(torch.empty(max(1, spacer_mb << 20), dtype=torch.uint8, device="cuda"))
        for turn in range(2):
            for i, (graph, n, kept) in enumerate(graphs):
                us = steady_us(graph, n, 50)
                first = kept[0][0] if isinstance(kept[0], (tuple, list)) else kept[0]
                rows.append(
                    {
                        "goal": goal_name,
                        "callable": name,
                        "graph": i,
                        "turn": turn,
                        "us": us,
                        "output_ptr": first.data_ptr(),
                        "spacer_mb": spacer_mb,
                    }
                )
                print(
                    f"{goal_name:8s} {name:10s} spacer {spacer_mb:4d} MB graph {i} turn {turn} {us:7.3f} us "
                    f"out@{first.data_ptr():#x}",
                    flush=True,
                )
        del graphs, spacers
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    binding.free()
    return rows


def spin_probe(goal_name: str, shape_name: str, base: str) -> list[dict]:
    """Each callable's graph timed in turns with and without other processes keeping CPUs busy (a pure Python
    loop each, 0, 1 or 4 of them) and with and without the NVML sampler the eval's harness runs (here in the
    timed process): does the host's idleness or NVML's polling move the GPU's time?"""
    import subprocess

    from independent_graph import captured

    from jg_mcp.eval.clocks import device_sampler

    goal, kernel, binding, own = graph_inputs(goal_name, shape_name)
    rows = []
    for name, fn in (("candidate", kernel), (base, goal.baseline(base))):
        graph, n, kept = captured(fn, own, keep=True)
        for spinners, sampled in ((0, False), (0, True), (1, False), (0, True), (0, False), (4, True), (0, False)):
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(spinners)]
            time.sleep(0.3)
            with device_sampler("cuda") if sampled else contextlib.nullcontext():
                us = steady_us(graph, n, 100)
            for p in busy:
                p.kill()
                p.wait()
            rows.append({"goal": goal_name, "callable": name, "spinners": spinners, "sampled": sampled, "us": us})
            print(f"{goal_name:8s} {name:10s} spinners {spinners} sampled {sampled:d} {us:7.3f} us", flush=True)
        del graph, kept
    binding.free()
    return rows


HOLDER = (
    "import sys, time, torch\n"
    "x = torch.empty(int(sys.argv[1]) << 30, dtype=torch.uint8, device='cuda')\n"
    "x.zero_(); torch.cuda.synchronize(); print('ready', flush=True); time.sleep(900)\n"
)
"""Another process holding N GiB of GPU memory, written once, until it is killed."""


def capture_probe(goal_name: str, shape_name: str, base: str, held_gb: int = 40) -> list[dict]:
    """Each callable's graph captured six times in one process under three conditions (plain; while the NVML
    sampler runs here; while another process holds `held_gb` GiB of GPU memory, let go before any timing), all kept
    alive and timed in turn twice: is the state a graph runs in decided when it is captured, and by what?"""
    import subprocess

    import torch
    from independent_graph import captured

    from jg_mcp.eval.clocks import device_sampler

    goal, kernel, binding, own = graph_inputs(goal_name, shape_name)
    rows = []
    for name, fn in (("candidate", kernel), (base, goal.baseline(base))):
        graphs = []
        for condition in ("plain", "sampled", "held", "plain", "held", "sampled"):
            holder = None
            if condition == "held":
                holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(held_gb)], stdout=subprocess.PIPE)
                assert holder.stdout is not None and holder.stdout.readline().strip() == b"ready"
            with device_sampler("cuda") if condition == "sampled" else contextlib.nullcontext():
                graphs.append((condition, *captured(fn, own, keep=True)))
            if holder is not None:
                holder.kill()
                holder.wait()
        for turn in range(2):
            for i, (condition, graph, n, _kept) in enumerate(graphs):
                us = steady_us(graph, n, 100)
                rows.append(
                    {"goal": goal_name, "callable": name, "graph": i, "captured": condition, "turn": turn, "us": us}
                )
                print(
                    f"{goal_name:8s} {name:10s} graph {i} captured {condition:8s} turn {turn} {us:7.3f} us", flush=True
                )
        del graphs
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    binding.free()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--alive", action="store_true", help="graphs kept alive together (`alive`), not `probe`")
    parser.add_argument("--spin", action="store_true", help="one graph timed with and without a CPU spinner")
    parser.add_argument("--capture", action="store_true", help="graphs captured under three conditions")
    args = parser.parse_args()
    if args.capture:
        rows = capture_probe(*CASES[0]) + capture_probe(*CASES[1])
    elif args.spin:
        rows = spin_probe(*CASES[0]) + spin_probe(*CASES[1])
    elif args.alive:
        rows = [row for case in CASES[:1] for mb in (0, 1024) for row in alive(*case, spacer_mb=mb)]
        rows += alive(*CASES[1])
    else:
        rows = [row for case in CASES for row in probe(*case)]
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
