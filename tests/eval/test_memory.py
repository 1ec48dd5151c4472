"""A timed shape's buffers sized to the GPU's free memory (jg_mcp/eval/memory.py), driven on the CPU with stated
free memory, and the judge's chunks (checks.JUDGE_CHUNK) giving what a whole-output judge gives."""

from __future__ import annotations

import math

import pytest
import torch

from jg_mcp.eval import checks
from jg_mcp.eval.memory import (
    DEFAULT_PER_BYTE,
    MIN_INPUT_SETS,
    PER_BYTE_SAFETY,
    SHARE,
    graph_fit,
    per_byte,
    plan_timed,
    timed_need,
    unfit,
)
from jg_mcp.eval.options import TimingParams

GIB = 1 << 30
SOFTMAX_LARGEST = {"inputs": GIB, "outputs": GIB, "references": 2 * GIB, "work": 16 * GIB}
"""softmax at 131072 x 4096: 1 GiB of bf16 input and output, 2 GiB of float32 reference, and (stated) 16 GiB of
the harness's temporaries while it checked the shape."""
H100_FREE, H200_FREE = 64 * GIB, 130 * GIB
"""Stated free memory once the CUDA contexts, the timing processes' warm-up and what the correctness phase left are
taken: an H100 80 GB, an H200."""


def test_on_an_h100_the_largest_softmax_shape_gets_fewer_buffers_and_stays_within_the_budget():
    p = TimingParams()
    roomy = plan_timed(**SOFTMAX_LARGEST, free=H200_FREE, p=p)
    tight = plan_timed(**SOFTMAX_LARGEST, free=H100_FREE, p=p)
    slots = p.ring_bytes // GIB
    assert (roomy.input_sets, roomy.ring_slots) == (slots, slots), "the parameters' counts, a set per slot"
    assert roomy.fits and roomy.need_bytes <= SHARE * H200_FREE
    assert tight.fits and tight.need_bytes <= tight.budget_bytes == int(SHARE * H100_FREE)
    assert tight.ring_slots < roomy.ring_slots
    assert tight.input_sets >= MIN_INPUT_SETS
    assert roomy.need_bytes > SHARE * H100_FREE  # the defaults would not have fit the H100


def test_the_counts_shrink_as_the_free_memory_does_and_the_total_never_exceeds_the_budget():
    p = TimingParams()
    last = None
    for free_gib in (200, 100, 80, 70, 60, 55, 50, 46, 43):
        plan = plan_timed(**SOFTMAX_LARGEST, free=free_gib * GIB, p=p)
        assert plan.fits, free_gib
        assert plan.need_bytes <= SHARE * free_gib * GIB
        counts = (plan.input_sets, plan.ring_slots)
        if last is not None:
            assert counts[0] <= last[0] and counts[1] <= last[1]
        last = counts
    assert last == (MIN_INPUT_SETS, 1)


def test_a_shape_that_cannot_fit_even_with_the_fewest_buffers_is_not_timed_and_says_by_how_much():
    plan = plan_timed(**SOFTMAX_LARGEST, free=20 * GIB, p=TimingParams())
    assert not plan.fits
    assert (plan.input_sets, plan.ring_slots) == (MIN_INPUT_SETS, 1)
    why = unfit(plan)
    assert f"{plan.need_bytes / GIB:.1f} GiB" in why and "20.0 GiB" in why and "not timed" in why


def test_on_the_cpu_the_timing_parameters_decide_the_counts_with_an_input_set_per_call_of_a_block():
    p = TimingParams(input_sets=5, max_block=16)
    plan = plan_timed(inputs=100, outputs=10, references=200, work=None, free=None, p=p)
    assert (plan.input_sets, plan.ring_slots, plan.fits, plan.free_bytes) == (16, 16, True, None)
    few = plan_timed(
        inputs=100, outputs=10, references=200, work=None, free=None, p=p.model_copy(update={"max_block": 4})
    )
    assert (few.input_sets, few.ring_slots) == (5, 4), "at least input_sets"
    slow = plan_timed(inputs=100, outputs=10, references=200, work=None, free=None, p=p, floor_ms=p.block_ms / 6)
    assert (slow.input_sets, slow.ring_slots) == (6, 6), "no more calls than a block has at the physical floor"


def test_the_model_counts_each_timing_process_its_own_shared_buffers():
    base = timed_need(inputs=10, outputs=100, references=20, work=0, sets=3, slots=4)
    assert timed_need(10, 100, 20, 0, 3, 5) - base == 2 * 100  # one more ring slot in each process
    assert timed_need(10, 100, 20, 0, 4, 4) - base == (10 + 20) + 10 + 2 * 10  # made, pristine, both copies


def test_a_graphs_calls_each_with_a_set_and_a_slot_of_their_own_fit_within_the_share():
    free, mib = 10 * GIB, 1 << 20
    calls = graph_fit(inputs=8 * mib, outputs=4 * mib, ring_bytes=8 * GIB, free=free, graphs=1)
    per_call = 2 * 8 * mib + 2 * (8 * mib + 4 * mib) + 4 * mib  # two harness copies, two processes, one graph
    assert calls * per_call <= SHARE * free < (calls + 1) * per_call
    assert graph_fit(inputs=8 * mib, outputs=4 * mib, ring_bytes=8 * GIB, free=None, graphs=1) == 2048, "the ring alone"
    assert graph_fit(inputs=8 * GIB, outputs=4 * mib, ring_bytes=8 * GIB, free=free, graphs=1) == 0


def test_every_callables_graph_keeps_its_calls_outputs_so_more_callables_fit_fewer_calls():
    """Each callable's graph keeps every call's outputs (the worker copies them into the ring after the replay):
    at fused_add_rmsnorm's decode shape (8 MiB of outputs a call, three callables) a graph of 1,024 calls keeps 24 GiB
    that the count left out before."""
    free, mib = 70 * GIB, 1 << 20
    one = graph_fit(inputs=8 * mib, outputs=8 * mib, ring_bytes=8 * GIB, free=free, graphs=1)
    three = graph_fit(inputs=8 * mib, outputs=8 * mib, ring_bytes=8 * GIB, free=free, graphs=3)
    assert three < one
    assert three * (2 * 8 * mib + 2 * (8 * mib + 8 * mib) + 3 * 8 * mib) <= SHARE * free


def test_memory_per_byte_comes_from_the_largest_check_else_the_default():
    assert per_byte([]) == DEFAULT_PER_BYTE
    assert per_byte([(10 << 20, 1 << 20)]) == DEFAULT_PER_BYTE  # too small a check to say anything
    checks_ = [(900 << 20, 100 << 20), (5 * GIB, GIB), (3 * GIB, 300 << 20)]
    assert per_byte(checks_) == pytest.approx(PER_BYTE_SAFETY * 5)


def _judged(out, ref, atol, rtol):
    m = checks.measure(out, ref, atol, rtol)
    return m.stats.model_dump(), [(f.reason, f.detail) for f in m.findings], m.worst_ratio


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_judge_in_chunks_says_exactly_what_it_says_of_the_whole_output(monkeypatch, dtype):
    g = torch.Generator().manual_seed(3)
    ref = torch.randn(37, 53, generator=g, dtype=torch.float64).float()
    out = ref.to(dtype).clone()
    out[5, 7] += 3.0
    out[30, 2] = math.nan
    out.view(-1)[1000 : 1000 + 9].view(torch.int16 if dtype == torch.bfloat16 else torch.int32).fill_(-1)  # poison
    ref[11, 11] = math.inf
    whole = _judged(out, ref, 1e-3, 1e-2)
    mass_whole = [(f.reason, f.detail) for f in checks.mass_findings(out, ref, 1e-2)]
    monkeypatch.setattr(checks, "JUDGE_CHUNK", 64)
    assert _judged(out, ref, 1e-3, 1e-2) == whole
    assert [(f.reason, f.detail) for f in checks.mass_findings(out, ref, 1e-2)] == mass_whole
    assert {r for r, _ in whole[1]} >= {"unwritten", "nonfinite", "incorrect"}
