"""The harness's gate (GPU): one thread of one block spins on the GPU's global timer for as long as the gate lasts, and
writes down the longest time between two of its reads of the timer.

Holding the harness's stream behind it, the gate keeps the worker's `go` from firing until the worker has queued its
whole block (jg_mcp/eval/clock.py). Measuring its own gaps, it tells whether another CUDA context ran on the GPU
meanwhile: contexts do not share the GPU at once (without MPS), they take turns in time slices, so a thread of the
harness's that is switched out sees a gap of at least a time slice between two reads of the timer, where it
otherwise sees tens of nanoseconds; a gate of WATCH_MS is longer than two slices. Before a baseline's block the
candidate's processes are stopped and every block of theirs has ended; a gap then is GPU work of the candidate's
that outlived its block (SIGSTOP stops host threads, not kernels), which would slow the baseline and so flatter the
candidate.
"""

from __future__ import annotations

from typing import Any

import torch

BUSY_GAP_MS = 0.05
"""A gap between two reads of the timer over this is another context's time slice (the reads are tens of ns apart
otherwise)."""
WATCH_MS = 6.0
"""The shortest gate that is sure to see another context with work: on an H100 (lab/gate_probe.py) contexts took
turns in time slices of 2.39 ms; a 2 ms gate beside another process's kernel saw no gap (it ran within one slice,
starting a slice late), gates of 5-40 ms each saw a gap of 2.39 ms, and no gate saw one without that process."""

_KERNEL: Any = None


def _kernel() -> Any:
    global _KERNEL
    if _KERNEL is None:
        import triton
        import triton.language as tl

        @triton.jit
        def gate(out_ptr, wait_ns):
            zero = tl.load(out_ptr)
            start = tl.inline_asm_elementwise(
                "mov.u64 $0, %globaltimer; // $1", "=l,l", [zero], dtype=tl.int64, is_pure=False, pack=1
            )
            last = start
            worst = start - start
            while last - start < wait_ns:
                now = tl.inline_asm_elementwise(
                    "mov.u64 $0, %globaltimer; // $1", "=l,l", [last], dtype=tl.int64, is_pure=False, pack=1
                )
                worst = tl.maximum(worst, now - last)
                last = now
            tl.store(out_ptr, worst)

        _KERNEL = gate
    return _KERNEL


class Gate:
    """The harness's gate on its current stream, and the longest gap it saw (read after the stream is done)."""

    def __init__(self) -> None:
        self.gap = torch.zeros(1, dtype=torch.int64, device="cuda")

    def hold(self, ms: float) -> None:
        """Queue the gate on the current stream: it holds the stream for `ms`."""
        self.gap.zero_()
        _kernel()[(1,)](self.gap, int(ms * 1e6), num_warps=1)

    def gap_ms(self) -> float:
        """The longest gap the last gate saw between two reads of the timer (call once its stream is done)."""
        return float(self.gap.item()) / 1e6
