"""The run-time record of forbidden operators, inside the candidate's process (the families are jg_mcp/eval/ops.py's):
a hint, since the candidate's own code can undo it; the source check decides."""

from __future__ import annotations

import functools
from typing import Any

from jg_mcp.eval.ops import FAMILIES, in_family


class OpRecorder:
    """Records, and refuses, the aten ops of forbidden families the candidate's process runs, three ways (each a
    hint: they run in the candidate's process, which can undo them; the source check decides):

    - process-wide, in every thread and at every moment from `install()` on (import, checked calls, warm-up and
      timed blocks), at the backend keys (CPU, CUDA) of each such op, which every call reaches whatever its modes
      (under `torch.inference_mode()` too) and wherever it comes from (a composite's parts, native code calling
      through the dispatcher): a Python kernel that records the op and raises, so the library's kernel never runs
      there. It costs an honest kernel nothing (it calls no such op); a solution that runs a library op only once
      its calls come back to back, under inference_mode, fails where it is timed (red team round 5);
    - at the Autograd keys of each such op, a kernel that records it and redispatches below autograd (autograd
      through a forbidden op breaks in this process: no honest kernel uses one);
    - a torch dispatch mode, entered around each checked call, which sees that call's thread whatever its modes,
      and looks through each composite op to the ops it is made of (under inference_mode a composite such as
      `aten.linalg_matmul` reaches the mode by its own name, which no family lists). Not around timed calls: its
      host time per op would land on the device time of calls that wait for the host (on the H200 it made an
      honest kernel's lone fresh calls 5x its timed ones, and a caching hack's timed calls as slow as its fresh).

    Ops a native kernel runs inside another op without the dispatcher (sparse.mm's addmm, bilinear's bmm) are not
    seen any way."""

    def __init__(self, ops: set[str]):
        self.ops = ops
        self.members = {op for family in FAMILIES for op in family if op in ops}
        """The family members among `ops`: an op they relate to by name (`in_family`) is recorded too."""
        self.seen: list[str] = []
        self._mode: Any = None
        self._library: Any = None

    def record(self, name: str) -> None:
        if name in self.ops or name.rstrip("_") in self.ops or in_family(name, self.members):
            self.seen.append(name)

    def install(self) -> None:
        """Register the process-wide recording kernels (once, before the candidate is imported)."""
        if not self.ops or self._library is not None:
            return
        import warnings

        import torch

        self._library = torch.library.Library("aten", "IMPL")
        below = torch._C._after_autograd_keyset
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel": that is the point
            aten = {n.split("::", 1)[1] for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")}
            related = {n for n in aten if in_family(n, self.members)}
            for name in sorted(self.ops | {f"{n}_" for n in self.ops} | related):
                packet = getattr(torch.ops.aten, name, None)
                for overload in packet.overloads() if packet is not None else []:
                    op = getattr(packet, overload)
                    for key in ("AutogradCPU", "AutogradCUDA"):
                        try:
                            self._library.impl(op, self._kernel(op, name, below), key, with_keyset=True)
                        except (RuntimeError, TypeError, ValueError):
                            continue  # an overload that takes no Python kernel: the dispatch mode still sees it
                    for key in ("CPU", "CUDA"):
                        try:
                            self._library.impl(op, self._refusal(name), key)
                        except (RuntimeError, TypeError, ValueError):
                            continue

    def _refusal(self, name: str) -> Any:
        def kernel(*args: Any, **kwargs: Any) -> Any:
            self.record(name)
            raise RuntimeError(f"aten.{name} is an operator of a forbidden family: refused in the candidate's process")

        return kernel

    def _kernel(self, op: Any, name: str, below: Any) -> Any:
        def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            self.record(name)
            return op.redispatch(keyset & below, *args, **kwargs)

        return kernel

    def __enter__(self) -> OpRecorder:
        if self.ops:
            self._mode = _mode_class()(self)
            self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._mode is not None:
            self._mode.__exit__(*exc)
            self._mode = None


@functools.cache
def _mode_class() -> type:
    """The recorder's dispatch mode (made once, on first use: torch is imported by then)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class RecordingMode(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            """Opt out of the wrapper that keeps Dynamo out of `__torch_dispatch__`: it imports torch._dynamo at the
            first call, seconds of every candidate's first checked call (4 of its 5-6 s on the H200), and nothing
            traces this mode."""
            return False

        def __init__(self, recorder: OpRecorder):
            super().__init__()
            self.recorder = recorder

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            self.recorder.record(func.overloadpacket.__name__)
            if func._can_decompose():  # a composite op: what it is made of passes through here too
                with self:
                    out = func.decompose(*args, **(kwargs or {}))
                if out is not NotImplemented:
                    return out
            return func(*args, **(kwargs or {}))

    return RecordingMode
