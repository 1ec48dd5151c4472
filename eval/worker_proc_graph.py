"""The eval's graph timing in a process started as the eval starts its workers (the part `dobench_workerproc` of
eval/h200_dobench.py). The eval's own `Worker.graph`, timed in the independent measurement's process, matched the
independent graph within 0.1% and stayed 2-14% above the eval's graph times, so the gap is in the process that runs the
graph, not in the code (docs/decisions/2026-12-03-graph-state-across-processes.md). Here a worker process
(jg_mcp/eval/processes/process.py's `WorkerProcess`, unsandboxed, the baselines' compile caches) imports the callable's
module, maps input sets this process holds, as it maps the harness's, and captures and times its graph in the eval's
pattern (a capture, then rounds of a lead and the timed replays); nothing else of an eval runs (no correctness calls, no
per-call timing, no other worker). Its times matched the eval's within 0.6% at the five graph-timed shapes of rope,
softmax and fused_add_rmsnorm, every callable.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


class WorkerGraph:
    """One worker process importing `module` for its callable `function`, with `sets` bound as the graph's inputs
    (each tensor in a buffer of its own, shared with the worker as the harness shares its buffers). On the CPU
    (`device`) the worker's stand-in runs the graph's calls one by one."""

    def __init__(self, module: Path, function: str, sets: list[list], device: str = "cuda"):
        from jg_mcp.eval.processes.process import WorkerLaunch, WorkerProcess
        from jg_mcp.eval.wire.buffers import SharedBinding
        from jg_mcp.eval.wire.messages import Ready, Setup

        self.work = tempfile.mkdtemp(prefix="jg-workerproc-")
        cache_env = {k: os.environ[k] for k in CACHE_VARIABLES if k in os.environ}
        self.proc = WorkerProcess.spawn(
            WorkerLaunch("baseline", Path(self.work), False, "jg-check", 300, device, cache_env or None)
        )
        self.proc.start(Setup(role="baseline", device=device, module=str(module), functions={"fn": function}))
        ready = self.proc.recv()
        if not isinstance(ready, Ready):
            raise RuntimeError(f"the worker process did not start: {ready}")
        self.binding = SharedBinding("gin", device)
        for group in sets:
            self.binding.add_copy(group)
        self.proc.bind(self.binding)
        self.n_sets = len(sets)

    def times(self, lead: int, rounds: int = 6, replays: int = 3) -> list[float]:
        """Per-call device times (ms) of the timed replays of the eval's pattern (eval/eval_code_graph.py's
        `eval_pattern`; the gap between lead and timed replays is the message's round trip, as in the eval)."""
        from eval_code_graph import eval_pattern

        from jg_mcp.eval.wire.messages import BlockDone

        times: list[float] = []
        for message, timed in eval_pattern(self.n_sets, lead, rounds, replays):
            self.proc.send(message)
            done: Any = self.proc.recv()
            if not isinstance(done, BlockDone) or done.error is not None:
                raise RuntimeError(f"the worker's graph failed: {getattr(done, 'error', done)}")
            times += done.times_ms if timed else []
        return times

    def close(self) -> None:
        from jg_mcp.eval.wire.messages import Release

        self.proc.send(Release(names=["gin"]))
        self.proc.recv()
        self.proc.close()
        self.binding.free()
        shutil.rmtree(self.work, ignore_errors=True)
