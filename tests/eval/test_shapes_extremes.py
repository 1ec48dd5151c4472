"""The domain's extremes (shapes.extremes), chosen on the CPU for a stated GPU memory: as large as half of the free
memory allows, large in several dimensions at once, where the drawn and top shapes never go."""

from __future__ import annotations

import random

import pytest
from eval_suite import GOALS

from jg_mcp.eval.memory import DEFAULT_PER_BYTE
from jg_mcp.eval.shapes import EXTREME_FLOPS, EXTREME_SHARE, extremes, select_cases
from jg_mcp.goals import load_goal

GIB = 1 << 30
CARDS = {"h100_80gb": 78 * GIB, "h200_141gb": 139 * GIB}
"""The stated free memory of each card: what torch reports of an H100 80 GB and an H200 141 GB, all of it free."""
PER_BYTE = [DEFAULT_PER_BYTE, 24.0]
"""The default memory per byte moved, and a pessimistic measured one."""
SHIPPED = sorted(GOALS.glob("*.yaml"))


@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("per_byte", PER_BYTE)
def test_swiglu_is_checked_past_two_to_the_27_elements(card, per_byte):
    """A swiglu whose offsets wrap at 2^27 elements passed every drawn, top and beyond shape."""
    goal = load_goal(GOALS / "swiglu.yaml")
    cases = extremes(goal, CARDS[card], per_byte, random.Random(0))
    assert cases
    assert all(c.dims["T"] * c.dims["I"] > 2**27 for c in cases), [c.dims for c in cases]


@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("per_byte", PER_BYTE)
@pytest.mark.parametrize("name", ["gemm_bf16", "gemm_fp8"])
def test_a_gemm_as_large_as_llama3_70b_mlp_at_8k_tokens_is_checked(card, per_byte, name):
    goal = load_goal(GOALS / f"{name}.yaml")
    cases = extremes(goal, CARDS[card], per_byte, random.Random(0))
    assert any(c.dims["M"] * c.dims["N"] > 2**25 and c.dims["K"] >= 8192 for c in cases), [c.dims for c in cases]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
@pytest.mark.parametrize("card", CARDS)
def test_every_extreme_fits_half_the_free_memory_and_its_work_cap_and_lies_in_the_domain(path, card):
    goal = load_goal(path)
    g = goal.goal
    most_flops = EXTREME_FLOPS * max(goal.flops(s.dims) for s in g.shapes)
    cases = extremes(goal, CARDS[card], DEFAULT_PER_BYTE, random.Random(1))
    assert cases and cases[0].name == "extreme_corner"
    for c in cases:
        assert c.kind == "extreme" and c.chosen
        assert DEFAULT_PER_BYTE * goal.bytes(c.dims) <= EXTREME_SHARE * CARDS[card]
        assert goal.flops(c.dims) <= most_flops
        assert not [n for n, r in g.shape_domain.items() if r.problem(c.dims[n])], c.dims
    assert len({tuple(sorted(c.dims.items())) for c in cases}) == len(cases)


def test_the_corner_itself_is_checked_where_it_fits_and_is_scaled_down_where_it_does_not():
    goal = load_goal(GOALS / "gemm_fp8.yaml")
    corner = {n: r.max // r.multiple_of * r.multiple_of for n, r in goal.goal.shape_domain.items()}
    roomy = extremes(goal, 139 * GIB, DEFAULT_PER_BYTE, random.Random(0))[0]
    assert roomy.dims == corner and "scaled" not in (roomy.chosen or "")
    tight = extremes(goal, 20 * GIB, DEFAULT_PER_BYTE, random.Random(0))[0]
    assert all(tight.dims[n] < corner[n] for n in corner) and "scaled by" in (tight.chosen or "")


def test_more_memory_gives_larger_extremes():
    goal = load_goal(GOALS / "softmax.yaml")
    small = extremes(goal, CARDS["h100_80gb"], DEFAULT_PER_BYTE, random.Random(0))
    large = extremes(goal, CARDS["h200_141gb"], DEFAULT_PER_BYTE, random.Random(0))
    assert all(goal.bytes(b.dims) > goal.bytes(a.dims) for a, b in zip(small, large, strict=True))


def test_on_the_gpu_the_tops_fit_half_the_free_memory_and_the_cpu_checks_no_extremes():
    """At an 80 GB card every shipped goal's tops fit already (cross_entropy's largest: 31 GiB by the default memory
    per byte); on a 40 GB card its T top is scaled down to fit."""
    goal = load_goal(GOALS / "cross_entropy.yaml")
    free = 40 * GIB

    def tops(**free_):
        return [c for c in select_cases(goal, "all", "cuda", 2, random.Random(0), **free_) if c.name.startswith("top_")]

    assert any(DEFAULT_PER_BYTE * goal.bytes(c.dims) > EXTREME_SHARE * free for c in tops())
    assert tops(free=free) and all(
        DEFAULT_PER_BYTE * goal.bytes(c.dims) <= EXTREME_SHARE * free for c in tops(free=free)
    )
    assert not [c for c in select_cases(goal, "all", "cpu", 2, random.Random(0), free=free) if c.kind == "extreme"]
