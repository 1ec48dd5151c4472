"""What decides the state a CUDA graph runs in (GPU only; eval/results/h200/check.md, stops 34-35). A graph of the
same calls takes one of two times per call, ~0.3-0.7 us apart at rope's 8b decode shape, and keeps it while it lives
(lab/offset_probe.py ruled out placement, CPU load, NVML and the capture's conditions). This probe starts several
fresh processes on one machine, one after another, and in each:

- reports what is loaded into it that could instrument kernels (a CUDA injection library, CUPTI, LD_PRELOAD);
- times graphs of 64 calls of two trivial one-block kernels (torch's `add`, a Triton kernel that stores one value)
  at checkpoints of the process's life (after CUDA starts, after torch.compile's modules are imported, after rope's
  baselines are compiled and called, at the end), new graphs at each and the earlier ones again: does a process
  change state, and does a graph keep its own?
- times each of rope's 8b decode callables (the solution, the compiled baseline) in two graphs, each five ways: as
  torch replays it, replayed on another stream, after `cuGraphUpload` to the timing stream, and instantiated again
  by the driver from the same graph (plain, then uploaded): is the state in the executable graph, its upload, or
  the kernels?

Run 48 (six processes, all plain or with one CUDA variable, `ENVS`) found every graph slow, every way, while the
eval's workers on that machine timed rope fast in run 49. `--starts` (run 50) therefore runs the same child started
in other ways, beside the eval itself, on one machine (`STARTS`):

- `plain`: the child as above; `session`: started as the eval starts a worker (a new session, stdin from /dev/null,
  `-X faulthandler`, another working directory), with the host's environment; `cleared`: the same with the
  environment the eval gives its workers;
- `workerproc`: a process holding rope's inputs that starts a real worker process (eval/worker_proc_graph.py) for
  each callable and has it time its graph in the eval's pattern, beside its own graph of the same calls;
- `eval`: the eval itself (`evaluate`, rope's known-good solution, only the 8b decode shape): its graph times.

Run 50 found the eval and the worker processes fast, and the child that had started a worker fast too, even for
its own graph captured after the worker ended. `--preludes` (run 51) varies what a child does before it captures
(PRELUDES): nothing, another CUDA process alive or ended, a worker process started or given its inputs. Only a
worker process that had run the same graphs put the compiled baseline's graph in the fast state; any other CUDA
process did it for the solution's (eval/results/h200/check.md, stop 35).

The children are lab/state_children.py. Prints one line per process and callable and writes every time as JSON
with --out.

    python lab/state_probe.py [--out FILE] [--procs N] [--starts [plain,eval,...]] [--preludes [none,...]]
"""

from __future__ import annotations

import argparse
import contextlib
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

from state_children import CASE, PRELUDES, child, eval_child, prelude_child, worker_child  # noqa: E402

ENVS = (
    ("plain", {}),
    ("plain", {}),
    ("eager_loading", {"CUDA_MODULE_LOADING": "EAGER"}),
    ("plain", {}),
    ("one_connection", {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}),
    ("plain", {}),
)
"""Each process's name and what its environment adds."""
STARTS = ("plain", "eval", "workerproc", "session", "cleared", "plain", "eval", "workerproc")
"""The order `--starts` runs its processes in by default: each way twice or more, interleaved."""
PRELUDE_ORDER = (
    *("none", "peer_alive", "peer_gone", "worker_started", "worker_bound"),
    *("workerproc", "none", "peer_alive", "worker_bound"),
)
"""The order `--preludes` runs its children in by default (run 51's; `workerproc` is STARTS's)."""
WATCHED = ("CUDA_INJECTION64_PATH", "LD_PRELOAD", "CUDA_MODULE_LOADING", "CUDA_DEVICE_MAX_CONNECTIONS")
INSTRUMENTS = ("cupti", "inject", "nvtx", "nsys", "tracer")
"""Substrings of a mapped library's name that could mean something instruments the kernels."""


def loaded() -> dict:
    """The environment variables of WATCHED that are set, and the mapped libraries whose name has an INSTRUMENTS
    substring."""
    maps = Path("/proc/self/maps").read_text().splitlines()
    libs = sorted({line.split()[-1] for line in maps if any(s in line.rsplit("/", 1)[-1] for s in INSTRUMENTS)})
    return {"env": {k: os.environ[k] for k in WATCHED if k in os.environ}, "libs": libs}


def launch(start: str, tag: str, cache: Path) -> subprocess.CompletedProcess:
    """One child process started the `start` way (STARTS), its compile caches at `cache`."""
    from h200_dobench import cleared_env

    from jg_mcp.eval.processes.compile_cache import baseline_env

    mode = {"eval": "--eval-child", "workerproc": "--worker-child"}.get(start, "--child")
    argv = [sys.executable, __file__, mode, tag]
    if start in PRELUDES:
        argv = [sys.executable, __file__, "--prelude-child", f"{tag}:{start}"]
    if start in ("plain", "eval", "workerproc", *PRELUDES):
        return subprocess.run(argv, env=os.environ | baseline_env(cache), capture_output=True, text=True)
    env = cleared_env() if start == "cleared" else dict(os.environ)
    env |= baseline_env(cache) | {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PYTHONUNBUFFERED": "1"}
    home = tempfile.mkdtemp(prefix="jg-state-home-")
    argv = [sys.executable, "-X", "faulthandler", *argv[1:]]
    return subprocess.run(
        argv, env=env, cwd=home, stdin=subprocess.DEVNULL, capture_output=True, text=True, start_new_session=True
    )


def summary(rows: list[dict]) -> list[str]:
    """One line per process and callable: the trivial graphs' times (first and last checkpoint, each graph's range)
    and rope's, each way."""
    lines = []
    for proc in dict.fromkeys(r["proc"] for r in rows):
        mine = [r for r in rows if r["proc"] == proc]
        for kernel in ("torch_add", "triton_store"):
            at: dict[str, list[float]] = {}
            for r in mine:
                if r.get("callable") == kernel:
                    at.setdefault(r["point"], []).append(r["us"])
            if at:
                lines.append(
                    f"{proc:18s} {kernel:13s} " + "  ".join(f"{p} {min(v):.3f}-{max(v):.3f}" for p, v in at.items())
                )
        for callable_name in dict.fromkeys(r["callable"] for r in mine if r["point"] == "rope" and "us" in r):
            ways = [r for r in mine if r["point"] == "rope" and r["callable"] == callable_name and "us" in r]
            lines.append(
                f"{proc:18s} {callable_name:13s} " + " ".join(f"{r['way']}#{r['copy']} {r['us']:.3f}" for r in ways)
            )
    return lines


def table(rows: list[dict]) -> str:
    """Markdown: per process and way rope was timed there (torch's replay, the eval's, a worker process's, after
    a prelude), the median time per call of each callable's graphs (us)."""
    ways = ("replay", "eval", "worker_process", *PRELUDES)
    timed = [r for r in rows if r.get("point") == "rope" and r.get("way") in ways and "us" in r]
    callables = list(dict.fromkeys(r["callable"] for r in timed if r["callable"] in ("candidate", CASE[2])))
    lines = [
        f"| process | timed by | {' | '.join(f'{c} us' for c in callables)} |",
        "|" + " --- |" * (2 + len(callables)),
    ]
    for proc, way in dict.fromkeys((r["proc"], r["way"]) for r in timed):
        cells = []
        for c in callables:
            us = [r["us"] for r in timed if (r["proc"], r["way"], r["callable"]) == (proc, way, c)]
            cells.append(f"{statistics.median(us):.3f}" if us else "-")
        lines.append(f"| {proc} | {way} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--procs", type=int, default=len(ENVS))
    parser.add_argument("--starts", nargs="?", const=",".join(STARTS), help="start the processes these ways")
    parser.add_argument(
        "--preludes", nargs="?", const=",".join(PRELUDE_ORDER), help="children that capture after these preludes"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--prelude-child", help=argparse.SUPPRESS)
    parser.add_argument("--eval-child", help=argparse.SUPPRESS)
    parser.add_argument("--worker-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    children = ((args.child, child), (args.eval_child, eval_child), (args.worker_child, worker_child))
    for tag, run in (*children, (args.prelude_child, prelude_child)):
        if tag:
            print(json.dumps({"loaded": loaded(), "rows": run(tag)}), flush=True)
            return 0
    ways = args.starts or args.preludes
    if ways and (unknown := set(ways.split(",")) - set(STARTS) - set(PRELUDES)):
        parser.error(f"no way named {', '.join(sorted(unknown))} (known: {', '.join({*STARTS, *PRELUDES})})")
    cache = Path(tempfile.mkdtemp(prefix="jg-state-probe-"))
    runs = [(f"{i}_{s}", s, {}) for i, s in enumerate(ways.split(","))] if ways else []
    runs = runs or [(f"{i}_{name}", "plain", extra) for i, (name, extra) in enumerate(ENVS[: args.procs])]
    rows, facts = [], {}
    for tag, start, extra in runs:
        with patched_env(extra):
            done = launch(start, tag, cache)
        if done.returncode != 0:
            print(f"{tag}: exit {done.returncode}\n{done.stderr[-3000:]}", flush=True)
            facts[tag] = {"exit": done.returncode, "stderr": done.stderr[-3000:]}
            continue
        got = json.loads(done.stdout.strip().splitlines()[-1])
        facts[tag], rows = got["loaded"], rows + got["rows"]
        print(f"{tag}: loaded {got['loaded']}", flush=True)
        print("\n".join(summary(got["rows"])), flush=True)
    print(table(rows), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"processes": facts, "rows": rows}, indent=1))
    return 0


@contextlib.contextmanager
def patched_env(extra: dict[str, str]):
    """This process's environment with `extra` added while a child starts (run 48's ENVS)."""
    saved = dict(os.environ)
    os.environ.update(extra)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


if __name__ == "__main__":
    sys.exit(main())
