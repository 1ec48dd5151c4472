"""GPU memory: every count of a shape's buffers is sized to the free memory of the GPU the eval runs on, measured
just before the shape's buffers are made, so that an H100's 80 GB serves as an H200's 141 GB does.

On an H100 80 GB the known-good softmax's eval crashed (`cudaMalloc: out of memory`). By the code, at its largest
timed shape (131072 x 4096, 1 GiB of input) the timing phase with the default counts held about 90 GiB at once:
three input sets with their float32 references in the harness (9 GiB), the candidate's pristine copies (3 GiB), the
float64 reference's temporaries (about 14 GiB), the judge's float64 temporaries over a whole output (about 40 GiB;
it judges in chunks now, checks.JUDGE_CHUNK), and in each of the two timing processes' shared buffers three input
sets, an 8-slot output ring and one more set (12 GiB each), besides each process's own outputs;
and the harness's allocator kept what the correctness phase had cached, which cudaMalloc cannot use. Here the
harness empties its own cache, measures what is free, and gives the shape at most SHARE of it, shrinking the ring
and then the input sets (to MIN_INPUT_SETS and one slot at least); a shape that cannot fit even so is not timed,
with the numbers in its report (`ShapeResult.timing_skipped`). On the H100 the same eval is accepted now, that shape
timed over 2 input sets with 4 ring slots (48.5 GiB by the model, of 53.3 allowed; its check's measured peak 22
GiB).

The arithmetic (`timed_need`, `plan_timed`, `per_byte`) is pure, tested on the CPU with stated free memory; only
`free_bytes` measures."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jg_mcp.eval.options import TimingParams
from jg_mcp.eval.report_timing import MemoryPlan

if TYPE_CHECKING:
    import torch

SHARE = 0.8
"""All buffers of one timed shape (the harness's and both timing processes') take at most this share of the free
memory measured before they are made; the rest is headroom for the allocators' rounding and for what the
processes allocate that the model does not count (a callable's own workspace)."""
FEW_SLOTS = 4
"""The ring is halved down to this many slots before any input set goes (a block of four calls still lets the
harness pick which call it checks), then down to one slot once the input sets are at their fewest."""
MIN_INPUT_SETS = 2
"""The fewest input sets of a timed shape: a block of two calls, each on a set of its own."""
WORKER_OUTPUTS = 2
"""Output sets each timing process allocates beyond the shared buffers: one call's own outputs, and as much again
for a callable's temporaries (an eager baseline's intermediate is as large as an output)."""
WORK_PER_BYTE = 8
"""Without a measured check of the shape, the harness's temporaries (its float64 reference, the judge) are taken
as this many times the bytes of one input set and its references."""
PER_BYTE_FLOOR_BYTES = 64 << 20
"""A check moving fewer bytes says little of the memory per byte (the allocator's rounding dominates)."""
PER_BYTE_SAFETY = 1.25
"""The measured memory per byte is scaled by this before it sizes a shape never checked before."""
DEFAULT_PER_BYTE = 16.0
"""GPU memory per byte moved when no check large enough was measured: a float64 reference's temporaries over bf16
data (by their code: softmax's reference holds about 30 bytes per element, of 4 moved; swiglu's about 40, of 6;
cross_entropy's about 26, of 2), with the inputs, references and buffers the check holds besides."""


def free_bytes(device: str) -> int | None:
    """Free memory of the current GPU after the harness's own allocator cache is returned to it; None on the CPU."""
    if device != "cuda":
        return None
    import torch

    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return int(torch.cuda.mem_get_info()[0])


def timed_need(inputs: int, outputs: int, references: int, work: int, sets: int, slots: int) -> int:
    """Bytes one timed shape takes with `sets` input sets and `slots` ring slots, from the bytes of one input set,
    one output set (in the goal's dtypes) and one set's references:
    - the harness's allocator: what it last wrote into every set, with its references (`sets` x (inputs +
      references)), a round's new inputs, held until both processes have them (`sets` x inputs), and `work`, its
      temporaries (making a set and its reference, judging a call's outputs);
    - the shared buffers, one copy per timing process: the input sets and the ring (2 x (sets x inputs + slots x
      outputs));
    - in each of the two timing processes: WORKER_OUTPUTS output sets."""
    harness = sets * (inputs + references) + sets * inputs + work
    shared = 2 * (sets * inputs + slots * outputs)
    return harness + shared + 2 * WORKER_OUTPUTS * outputs


def plan_timed(
    inputs: int,
    outputs: int,
    references: int,
    work: int | None,
    free: int | None,
    p: TimingParams,
    floor_ms: float = 0.0,
) -> MemoryPlan:
    """The counts of a timed shape's buffers: as many ring slots as `max_block` and `ring_bytes` allow, and as a
    block can have calls at the shape's physical floor (`floor_ms`: no call is faster, so no block of `block_ms`
    has more), and as many input sets (at least `input_sets`: a block's calls each read a set of their own), shrunk
    until `timed_need` is
    within SHARE of `free`: the ring halved to FEW_SLOTS (the sets with it), then the input sets down to
    MIN_INPUT_SETS, then the ring down to one slot. `work` is the harness's measured peak while it checked the
    shape (None: WORK_PER_BYTE times a set and its references). With no `free` (the CPU) the parameters' counts
    stand."""
    slots = max(1, min(p.max_block, p.ring_bytes // max(1, outputs), block_calls(p, floor_ms)))
    sets = max(p.input_sets, slots)
    temporaries = work if work is not None else WORK_PER_BYTE * (inputs + references)

    def need(s: int, r: int) -> int:
        return timed_need(inputs, outputs, references, temporaries, s, r)

    if free is None:
        return MemoryPlan(
            free_bytes=None,
            budget_bytes=None,
            need_bytes=need(sets, slots),
            input_sets=sets,
            ring_slots=slots,
            fits=True,
        )
    budget = int(SHARE * free)
    least = min(sets, MIN_INPUT_SETS)
    while need(sets, slots) > budget:
        if slots > FEW_SLOTS:
            slots = max(FEW_SLOTS, slots // 2)
            sets = max(least, min(sets, max(p.input_sets, slots)))
        elif sets > least:
            sets -= 1
        elif slots > 1:
            slots //= 2
        else:
            break
    return MemoryPlan(
        free_bytes=free,
        budget_bytes=budget,
        need_bytes=need(sets, slots),
        input_sets=sets,
        ring_slots=slots,
        fits=need(sets, slots) <= budget,
    )


def block_calls(p: TimingParams, floor_ms: float) -> int:
    """The most calls a block of `block_ms` can have at a call time of `floor_ms` (no bound at 0)."""
    if floor_ms <= 0 or p.block_ms <= 0:
        return p.max_block
    return max(1, math.ceil(p.block_ms / floor_ms))


def nbytes(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def plan_shape(
    device: str,
    made: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]],
    like: Sequence[torch.Tensor],
    work: int | None,
    p: TimingParams,
    floor_ms: float,
) -> MemoryPlan:
    """`plan_timed` for a shape from its first input set and references (`made`) and its output layout (`like`),
    against the memory free now (with them made)."""
    inputs, refs = made
    return plan_timed(nbytes(inputs), nbytes(like), nbytes(refs), work, free_bytes(device), p, floor_ms)


def unfit(plan: MemoryPlan) -> str:
    """Why a shape whose plan does not fit is not timed, with the numbers."""
    return (
        f"its buffers need {plan.need_bytes / 2**30:.1f} GiB even with {plan.input_sets} input sets and "
        f"{plan.ring_slots} ring slot(s), over the {SHARE:.0%} of the GPU's free {(plan.free_bytes or 0) / 2**30:.1f} "
        f"GiB they may take ({(plan.budget_bytes or 0) / 2**30:.1f} GiB): not timed"
    )


def graph_fit(inputs: int, outputs: int, ring_bytes: int, free: int | None, graphs: int) -> int:
    """The most calls a CUDA graph may have, each with an input set and a ring slot of its own: as many as
    `ring_bytes` of outputs per timing process, and as leave within SHARE of the memory `free` (while the shape's
    per-call buffers are still held) the harness's two copies of every set (what it last wrote, a round's new
    inputs), each timing process's set and slot per call, and the outputs of every call that each of the `graphs`
    captured graphs (one per callable) keeps until the shape is done."""
    most = ring_bytes // max(1, outputs)
    if free is None:
        return most
    per_call = 2 * inputs + 2 * (inputs + outputs) + graphs * outputs
    return max(0, min(most, int(SHARE * free) // max(1, per_call)))


def per_byte(checks: Sequence[tuple[int, float]]) -> float:
    """GPU memory the harness takes per byte a shape moves, from (peak bytes of a check, the goal's bytes of its
    shape) pairs: at the check moving the most bytes (at least PER_BYTE_FLOOR_BYTES), times PER_BYTE_SAFETY; else
    DEFAULT_PER_BYTE. The largest check is the most like a larger shape, and the least inflated by what the timing
    processes' warm-up made in the harness at the same time."""
    large = [(moved, peak) for peak, moved in checks if moved >= PER_BYTE_FLOOR_BYTES]
    if not large:
        return DEFAULT_PER_BYTE
    moved, peak = max(large)
    return PER_BYTE_SAFETY * peak / moved
