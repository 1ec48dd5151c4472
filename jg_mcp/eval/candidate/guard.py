"""Guard: what a worker process must leave as it found it, captured before the candidate is imported.

The worker keeps its own references to the timer and the torch functions it uses and reports patching, trace
hooks, torch modes, threads and child processes left running, and a stream left current. All of it runs in the
candidate's process, so it is a hint: an early, well-explained finding, never a reason to accept.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import Finding

_TORCH_FUNCTIONS = ["empty", "_foreach_copy_"]
_TENSOR_METHODS = ["copy_", "zero_", "fill_", "clone", "elapsed_time"]
_CUDA_FUNCTIONS = ["synchronize", "current_stream", "default_stream", "set_stream", "Event", "Stream"]
_EVENT_METHODS = ["record", "elapsed_time", "synchronize", "query", "wait"]
_GRAPH_NAMES = ["graph", "CUDAGraph.replay", "CUDAGraph.capture_begin", "CUDAGraph.capture_end"]


def _lookup(root: Any, dotted: str) -> Any:
    obj = root
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
    return obj


@dataclass
class Guard:
    """Identities of everything the measurement and the checks rely on, and the threads alive before."""

    torch: ModuleType
    watched: dict[str, Any] = field(default_factory=dict)
    roots: dict[str, Any] = field(default_factory=dict)
    threads: set[int] = field(default_factory=set)
    children: set[int] = field(default_factory=set)

    @classmethod
    def capture(cls, torch: ModuleType, modules: dict[str, ModuleType]) -> Guard:
        """Snapshot now; `modules` are harness and goal modules whose functions must stay the same."""
        g = cls(torch=torch)
        g.roots = {"torch": torch, "time": time, **modules}
        names = [f"torch.{n}" for n in _TORCH_FUNCTIONS]
        names += [f"torch.Tensor.{n}" for n in _TENSOR_METHODS]
        names += [f"torch.cuda.{n}" for n in _CUDA_FUNCTIONS]
        names += [f"torch.cuda.Event.{n}" for n in _EVENT_METHODS]
        names += [f"torch.cuda.{n}" for n in _GRAPH_NAMES]
        names += ["time.perf_counter", "time.perf_counter_ns", "time.thread_time", "time.monotonic", "time.time"]
        for mod_name, mod in modules.items():
            names += [f"{mod_name}.{k}" for k, v in vars(mod).items() if callable(v) and not k.startswith("__")]
        for name in names:
            root, rest = name.split(".", 1)
            g.watched[name] = _lookup(g.roots[root], rest)
        g.absorb_threads()
        return g

    def tampering(self) -> list[Finding]:
        """Everything replaced since the capture, and hooks or torch modes that intercept calls."""
        found = []
        for name, obj in self.watched.items():
            root, rest = name.split(".", 1)
            if _lookup(self.roots[root], rest) is not obj:
                found.append(Finding(reason=Reason.TAMPERED, detail=f"`{name}` was replaced"))
        if sys.gettrace() is not None or sys.getprofile() is not None:
            found.append(Finding(reason=Reason.TAMPERED, detail="a trace or profile hook is installed"))
        c = self.torch._C
        if c._len_torch_function_stack() or c._len_torch_dispatch_stack():
            found.append(Finding(reason=Reason.TAMPERED, detail="a torch function or dispatch mode is active"))
        return found

    def absorb_threads(self) -> None:
        """Count threads alive now as the harness's: call right after harness-owned code (a baseline's compiler
        pools, say) so they are not blamed on the candidate."""
        self.threads |= {t.ident for t in threading.enumerate() if t.ident is not None}
        self.children |= _child_processes()

    def new_threads(self) -> list[Finding]:
        """Python threads and child processes alive now that were not alive at the capture (or absorbed)."""
        alive = [t for t in threading.enumerate() if t.ident not in self.threads and t.is_alive()]
        found = []
        if alive:
            names = ", ".join(t.name for t in alive)
            found.append(
                Finding(
                    reason=Reason.THREADS_LEFT, detail=f"{len(alive)} thread(s) still running after the call: {names}"
                )
            )
        if procs := sorted(_child_processes() - self.children):
            found.append(
                Finding(reason=Reason.THREADS_LEFT, detail=f"child process(es) still running after the call: {procs}")
            )
        return found

    def stream_left(self) -> list[Finding]:
        """On CUDA, the current stream must be the default stream again after the call."""
        cuda = self.torch.cuda
        if not cuda.is_available() or not cuda.is_initialized():
            return []
        if self.watched["torch.cuda.current_stream"]() != self.watched["torch.cuda.default_stream"]():
            return [Finding(reason=Reason.STREAM_LEFT, detail="the current CUDA stream is not the default stream")]
        return []


def _child_processes() -> set[int]:
    """Live child processes of this process (Linux: /proc/self/task/*/children)."""
    pids: set[int] = set()
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                pids |= {int(p) for p in f.read().split()}
    except OSError:
        return pids
    return pids
