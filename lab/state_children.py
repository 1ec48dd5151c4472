"""The children of lab/state_probe.py: each runs in a fresh process, times rope's 8b decode graphs one way and
returns its rows (GPU only). `child`: trivial graphs at checkpoints of the process's life and rope's graphs five ways
(torch's replay, another stream, `cuGraphUpload`, instantiated again by the driver, uploaded); `worker_child`: a
real worker process times each graph, then this process; `prelude_child`: this process times its own after a
prelude (PRELUDES); `eval_child`: the eval itself at that shape alone.
"""

from __future__ import annotations

import ctypes
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASE = ("rope", "llama3_8b_decode_bs256", "compiled")
"""The goal, shape and baseline every child times (the solution beside it)."""


class Driver:
    """The few driver calls this probe needs (libcuda), on executable graphs torch made or it makes itself."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")

    def check(self, result: int, what: str) -> None:
        if result != 0:
            raise RuntimeError(f"{what}: CUresult {result}")

    def upload(self, exec_handle: int, stream: int) -> None:
        self.check(self.lib.cuGraphUpload(ctypes.c_void_p(exec_handle), ctypes.c_void_p(stream)), "cuGraphUpload")

    def instantiate(self, graph_handle: int) -> int:
        out = ctypes.c_void_p()
        made = self.lib.cuGraphInstantiateWithFlags(
            ctypes.byref(out), ctypes.c_void_p(graph_handle), ctypes.c_ulonglong(0)
        )
        self.check(made, "cuGraphInstantiateWithFlags")
        return int(out.value or 0)

    def destroy(self, exec_handle: int) -> None:
        self.check(self.lib.cuGraphExecDestroy(ctypes.c_void_p(exec_handle)), "cuGraphExecDestroy")

    def launch(self, exec_handle: int, stream: int) -> None:
        self.check(self.lib.cuGraphLaunch(ctypes.c_void_p(exec_handle), ctypes.c_void_p(stream)), "cuGraphLaunch")


class Launched:
    """An executable graph the driver instantiated, replayed on torch's current stream."""

    def __init__(self, driver: Driver, handle: int) -> None:
        self.driver, self.handle = driver, handle

    def replay(self) -> None:
        import torch

        self.driver.launch(self.handle, torch.cuda.current_stream().cuda_stream)


def capture(fn, sets: list[list]):
    """A graph of n calls rotating over `sets` (n: the smallest multiple of their count from 64, as in the eval's
    graphs; warmed on a side stream), kept for the driver to instantiate again, n, and the calls' outputs."""
    import math

    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for s in sets:
            fn(*s)
    torch.cuda.current_stream().wait_stream(side)
    try:
        graph = torch.cuda.CUDAGraph(keep_graph=True)
    except TypeError:  # a torch without keep_graph: the driver's ways are then skipped
        graph = torch.cuda.CUDAGraph()
    kept, n = [], len(sets) * math.ceil(64 / len(sets))
    with torch.cuda.graph(graph):
        for i in range(n):
            kept.append(fn(*sets[i % len(sets)]))
    if hasattr(graph, "instantiate"):
        graph.instantiate()
    return graph, n, kept


def driver_ways(driver: Driver, graph, n: int, stream: int) -> dict[str, float]:
    """A torch graph timed after `cuGraphUpload` to `stream`, then instantiated again by the driver from the same
    graph (plain, then uploaded), then torch's again."""
    import torch
    from offset_probe import steady_us

    ways = {}
    driver.upload(graph.raw_cuda_graph_exec(), stream)
    ways["uploaded"] = steady_us(graph, n, 100)
    again = Launched(driver, driver.instantiate(graph.raw_cuda_graph()))
    ways["instantiated_again"] = steady_us(again, n, 100)
    driver.upload(again.handle, stream)
    ways["instantiated_uploaded"] = steady_us(again, n, 100)
    ways["replay_after"] = steady_us(graph, n, 100)
    torch.cuda.synchronize()
    driver.destroy(again.handle)
    return ways


def trivial_kernels() -> dict:
    """Two one-block kernels, each as a callable of one small tensor: torch's own and a Triton one."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def store_one(out_ptr):
        tl.store(out_ptr + tl.program_id(0), 1.0)

    def triton_one(x):
        out = torch.empty_like(x)
        store_one[(1,)](out)
        return out

    return {"torch_add": lambda x: x + 1, "triton_store": triton_one}


def child(name: str) -> list[dict]:
    """This process's rows: its instrumentation, trivial graphs at each checkpoint, rope's graphs five ways."""
    import torch
    from offset_probe import graph_inputs, steady_us

    rows: list[dict] = []
    torch.zeros(1, device="cuda")
    small = [[torch.zeros(256, device="cuda")] for _ in range(4)]
    trivial, alive = trivial_kernels(), []

    def checkpoint(point: str) -> None:
        for kernel, fn in trivial.items():
            alive.append((point, kernel, *capture(fn, small)))
        for made_at, kernel, graph, n, _kept in alive:
            us = steady_us(graph, n, 100)
            rows.append({"proc": name, "point": point, "callable": kernel, "captured_at": made_at, "us": us})

    checkpoint("cuda_started")
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401

    checkpoint("compile_imported")
    goal, kernel, binding, own = graph_inputs(CASE[0], CASE[1])
    fns = {"candidate": kernel, CASE[2]: goal.baseline(CASE[2])}
    for fn in fns.values():
        fn(*own[0])
    torch.cuda.synchronize()
    checkpoint("baselines_called")
    driver, other = Driver(), torch.cuda.Stream()
    for callable_name, fn in fns.items():
        for copy in range(2):
            graph, n, kept = capture(fn, own)
            stream = torch.cuda.current_stream().cuda_stream
            ways = {"replay": steady_us(graph, n, 100)}
            with torch.cuda.stream(other):
                ways["other_stream"] = steady_us(graph, n, 100)
            try:
                ways |= driver_ways(driver, graph, n, stream)
            except (AttributeError, RuntimeError) as exc:  # an older torch, or a driver call that failed
                rows.append({"proc": name, "point": "rope", "callable": callable_name, "error": repr(exc)})
            for way, us in ways.items():
                rows.append(
                    {"proc": name, "point": "rope", "callable": callable_name, "copy": copy, "way": way, "us": us}
                )
            del graph, kept
    checkpoint("end")
    binding.free()
    return rows


def worker_child(name: str) -> list[dict]:
    """rope's two callables timed by real worker processes in the eval's pattern, each beside this process's own
    graph of the same calls."""
    import torch
    from h200_dobench import module_of
    from offset_probe import graph_inputs, steady_us
    from worker_proc_graph import WorkerGraph

    goal, kernel, binding, own = graph_inputs(CASE[0], CASE[1])
    rows = []
    for callable_name, fn in (("candidate", kernel), (CASE[2], goal.baseline(CASE[2]))):
        worker = WorkerGraph(*module_of(CASE[0], goal, callable_name), own)
        try:
            worker_us = 1e3 * statistics.median(worker.times(lead=40))
        finally:
            worker.close()
        graph, n, kept = capture(fn, own)
        for way, us in (("worker_process", worker_us), ("replay", steady_us(graph, n, 100))):
            rows.append({"proc": name, "point": "rope", "callable": callable_name, "copy": 0, "way": way, "us": us})
        del graph, kept
        torch.cuda.synchronize()
    binding.free()
    return rows


PEER = (
    "import sys, torch\n"
    "torch.zeros(1, device='cuda'); torch.cuda.synchronize(); print('ready', flush=True); sys.stdin.read()\n"
)
"""Another process with a CUDA context of its own and nothing else, until its stdin closes."""
PRELUDES = ("none", "peer_alive", "peer_gone", "worker_started", "worker_bound")
"""What a `--prelude` child does before it captures: nothing; start a PEER kept alive while it captures and times;
start a PEER and end it; start a real worker process (the eval's, for rope's baselines) and end it; the same with
this process's input sets bound to it (mapped by the worker, as the harness's are) before it ends."""


def prelude_child(tag: str) -> list[dict]:
    """rope's two callables captured and timed in this process after its prelude (`TAG:PRELUDE`, PRELUDES)."""
    import torch
    from h200_dobench import module_of
    from offset_probe import graph_inputs, steady_us
    from worker_proc_graph import WorkerGraph

    from jg_mcp.eval.processes.process import WorkerLaunch, WorkerProcess
    from jg_mcp.eval.wire.messages import Ready, Setup

    name, prelude = tag.rsplit(":", 1)
    goal, kernel, binding, own = graph_inputs(CASE[0], CASE[1])
    fns = {"candidate": kernel, CASE[2]: goal.baseline(CASE[2])}
    for fn in fns.values():
        fn(*own[0])
    torch.cuda.synchronize()
    peer = None
    if prelude in ("peer_alive", "peer_gone"):
        peer = subprocess.Popen([sys.executable, "-c", PEER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert peer.stdout is not None and peer.stdout.readline().strip() == b"ready"
        if prelude == "peer_gone":
            peer.kill()
            peer.wait()
            peer = None
    elif prelude == "worker_started":
        work = Path(tempfile.mkdtemp(prefix="jg-state-worker-"))
        proc = WorkerProcess.spawn(WorkerLaunch("baseline", work, False, "jg-check", 300, "cuda", None))
        module, function = module_of(CASE[0], goal, CASE[2])
        proc.start(Setup(role="baseline", device="cuda", module=str(module), functions={"fn": function}))
        if not isinstance(ready := proc.recv(), Ready):
            raise RuntimeError(f"the worker process did not start: {ready}")
        proc.close()
    elif prelude == "worker_bound":
        WorkerGraph(*module_of(CASE[0], goal, CASE[2]), own).close()
    rows = []
    for callable_name, fn in fns.items():
        graph, n, kept = capture(fn, own)
        us = steady_us(graph, n, 100)
        rows.append({"proc": name, "point": "rope", "callable": callable_name, "copy": 0, "way": prelude, "us": us})
        del graph, kept
    if peer is not None:
        peer.kill()
        peer.wait()
    binding.free()
    return rows


def eval_child(name: str) -> list[dict]:
    """The eval of rope's known-good solution at CASE's shape alone: each callable's graph time, as its report
    gives it."""
    from h200_check import run_eval

    report = run_eval(REPO / "eval" / "solutions" / CASE[0] / "solution.py", CASE[0], shapes="timed", only=[CASE[1]])
    shape = next(s for s in report.shapes if s.name == CASE[1])
    timed = {"candidate": shape.candidate, **shape.baselines}
    return [
        {"proc": name, "point": "rope", "callable": n, "copy": 0, "way": "eval", "us": 1e3 * t.graph.median_ms}
        for n, t in timed.items()
        if t is not None and t.graph is not None
    ] + [{"proc": name, "point": "eval", "accepted": report.accepted, "reasons": list(report.reasons)}]
