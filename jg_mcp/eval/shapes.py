"""Which shapes an eval checks: the goal's timed and smoke shapes, plus untimed shapes drawn from its domain."""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from jg_mcp.eval.memory import DEFAULT_PER_BYTE
from jg_mcp.goals import LoadedGoal

CPU_GROWTH = 2
"""On the CPU (Triton interpreter) a drawn dimension is at most this times the largest smoke value."""
BEYOND_DRAWS = 2
"""Values drawn per dimension above the largest the goal times (`beyond`)."""
EXTREME_SHARE = 0.5
"""An extreme shape's check takes at most this share of the GPU's free memory in the harness (its inputs,
references, judging and the buffers it shares); the rest is the candidate's process's."""
EXTREME_DRAWS = 2
"""Shapes drawn large in several dimensions at once (`extremes`), besides the corner."""
EXTREME_FLOPS = 16
"""An extreme shape does at most this times the work of the largest timed shape: its float64 or float32 reference
runs on the GPU. attention_prefill's corner is 256 times its largest timed shape's flops; on an H100 its three
extremes at up to 45 times took 13 s of a 31 s eval (three trials each)."""
EXTREME_LOW = 16
"""A drawn extreme's dimensions are log-uniform between the domain's maximum over this and the maximum."""


@dataclass(frozen=True)
class Case:
    """One shape to check."""

    name: str
    kind: Literal["timed", "smoke", "domain", "top", "extreme"]
    dims: dict[str, int]
    chosen: str | None = None
    """How an `extreme` shape was chosen (the report's `ShapeResult.chosen`)."""


def draw(goal: LoadedGoal, device: str, rng: random.Random, index: int) -> Case:
    """A shape from the domain, each dimension log-uniform in its range: on the GPU no more data than the smallest
    timed shape, on the CPU interpreter-sized."""
    g = goal.goal
    base = dict((g.smoke_shapes if device == "cpu" else g.shapes)[0].dims)
    if device == "cpu":
        size, limit = goal.flops, CPU_GROWTH**3 * max(goal.flops(s.dims) for s in g.smoke_shapes)
    else:
        size, limit = goal.bytes, min(goal.bytes(s.dims) for s in g.shapes)
    for _ in range(100):
        dims = dict(base)
        for name, r in g.shape_domain.items():
            hi = r.max
            if device == "cpu":
                hi = min(hi, max(r.min, CPU_GROWTH * max(s.dims.get(name, 0) for s in g.smoke_shapes)))
            lo_k = -(-r.min // r.multiple_of)
            hi_k = max(hi // r.multiple_of, lo_k)
            dims[name] = r.multiple_of * min(hi_k, round(math.exp(rng.uniform(math.log(lo_k), math.log(hi_k + 1)))))
        if size(dims) <= limit:
            return Case(name=f"domain_{index}", kind="domain", dims=dims)
    smallest = {n: r.multiple_of * -(-r.min // r.multiple_of) for n, r in g.shape_domain.items()}
    return Case(name=f"domain_{index}", kind="domain", dims=base | smallest)


def _legal(value: int, r: object) -> int:
    lo, hi, m = r.min, r.max, r.multiple_of  # type: ignore[attr-defined]
    return max(m * -(-lo // m), min(hi // m * m, value // m * m))


def budget(goal: LoadedGoal, device: str, free: int | None = None) -> Callable[[dict[str, int]], bool]:
    """Whether a shape fits the budget of the checks past the named sizes: on the GPU twice the largest timed
    shape's flops and bytes, and with the GPU's `free` memory known, a check within EXTREME_SHARE of it at
    DEFAULT_PER_BYTE per byte moved (on an H100, cross_entropy's T top, 65536 x 16000, took 31 GiB in the harness:
    its float64 reference); on the CPU 16 times the largest smoke shape's flops and bytes."""
    shapes = goal.goal.smoke_shapes if device == "cpu" else goal.goal.shapes
    scale = CPU_GROWTH**4 if device == "cpu" else 2
    limit_flops = scale * max(goal.flops(s.dims) for s in shapes)
    limit_bytes = scale * max(goal.bytes(s.dims) for s in shapes)
    if device != "cpu" and free is not None:
        limit_bytes = min(limit_bytes, EXTREME_SHARE * free / DEFAULT_PER_BYTE)
    return lambda dims: goal.flops(dims) <= limit_flops and goal.bytes(dims) <= limit_bytes


def tops(goal: LoadedGoal, device: str, free: int | None = None) -> list[Case]:
    """Shapes past the largest ones checked otherwise, one per domain dimension: the shape where the dimension is
    largest, with it grown up to 4x (capped at the domain maximum) and the other dimensions halved until the shape
    fits the `budget`. A kernel wrong only above the sizes the goal names is caught here."""
    g = goal.goal
    shapes = g.smoke_shapes if device == "cpu" else g.shapes
    fits = budget(goal, device, free)
    cases = []
    for name, r in g.shape_domain.items():
        src = dict(max(shapes, key=lambda s: s.dims.get(name, 0)).dims)
        dims = src | {name: _legal(min(r.max, src[name] * 4), r)}
        while not fits(dims) and dims[name] > src[name]:
            if not _halve_another(goal, dims, name):
                dims[name] = _legal(dims[name] // 2, r)
        if fits(dims) and dims[name] > src[name]:
            cases.append(Case(name=f"top_{name}", kind="top", dims=dims))
    return cases


def _halve_another(goal: LoadedGoal, dims: dict[str, int], name: str) -> bool:
    """Halve the domain dimension other than `name` that is widest against its minimum; False when none can be."""
    domain = goal.goal.shape_domain
    others = [n for n in domain if n != name and _legal(dims[n] // 2, domain[n]) < dims[n]]
    if not others:
        return False
    widest = max(others, key=lambda n: dims[n] / domain[n].min)
    dims[widest] = _legal(dims[widest] // 2, domain[widest])
    return True


def beyond(goal: LoadedGoal, device: str, rng: random.Random, draws: int = BEYOND_DRAWS) -> list[Case]:
    """Per domain dimension, `draws` values drawn from above the largest value the goal times (the real sizes, on
    the CPU too) up to four times that, capped at the domain maximum and at the largest value a checkable shape
    holds: the range split into `draws` equal parts and one value drawn uniformly in each. The other dimensions
    start from the timed shape where this one is largest and are halved until the shape holds no more data and work
    than the smallest timed shape (on the CPU, the interpreter's `budget`). The values are secret and new at every
    eval, so a kernel wrong in part of that range only (past some number of blocks, at a length that is not a
    multiple of its page: a softmax normalising only whole 131072-column pages was accepted in 93% of GPU evals when
    only the range's top was checked) is caught wherever that part lies. No drawn value is left out: while a drawn
    value that fit no shape was dropped, that softmax passed a CPU eval whose lower value fell below its page."""
    g = goal.goal
    if device == "cpu":
        fits = budget(goal, device)
    else:
        least = min(g.shapes, key=lambda s: goal.bytes(s.dims)).dims
        limit_bytes, limit_flops = goal.bytes(least), goal.flops(least)
        fits = lambda dims: goal.bytes(dims) <= limit_bytes and goal.flops(dims) <= limit_flops  # noqa: E731
    cases = []
    for name, r in g.shape_domain.items():
        src = dict(max(g.shapes, key=lambda s: s.dims.get(name, 0)).dims)

        def shape_at(k: int, name: str = name, src: dict[str, int] = src, m: int = r.multiple_of) -> dict | None:
            dims = src | {name: m * k}
            while not fits(dims) and _halve_another(goal, dims, name):
                pass
            return dims if fits(dims) else None

        lo, hi = src[name] // r.multiple_of + 1, min(r.max, 4 * src[name]) // r.multiple_of
        if hi < lo or shape_at(lo) is None:
            continue
        # the largest value with a checkable shape (a shape only grows with a value)
        hi = lo - 1 + bisect.bisect_left(range(lo, hi + 1), True, key=lambda k: shape_at(k) is None)
        for i in range(draws):
            first, last = lo + (hi - lo + 1) * i // draws, lo + (hi - lo + 1) * (i + 1) // draws - 1
            if last < first:
                continue
            dims = shape_at(rng.randint(first, last))
            if dims is not None:  # halving goes in steps: a value inside the range may still fit no shape
                cases.append(Case(name=f"beyond_{name}_{i}", kind="top", dims=dims))
    return cases


def largest(goal: LoadedGoal, tops: Sequence[Case]) -> list[Case]:
    """On the CPU, one shape per dimension at the largest value the goal uses for it (its domain maximum, else its
    largest timed value), every other dimension at its smallest (the domain minimum, else the smallest value a
    named shape uses), where that fits the `budget` and no smoke or top shape reaches that value. The interpreter
    never runs a timed shape, and smoke, drawn and top shapes stay near the smoke sizes: a kernel wrong only at a
    real size (a row longer than one block, a table longer than a thousand rows) is caught here. On the GPU the
    timed shapes are checked themselves."""
    g = goal.goal
    named = g.shapes + g.smoke_shapes
    fits = budget(goal, "cpu")
    names = dict.fromkeys(n for s in g.shapes for n in s.dims)
    smallest = {n: min(s.dims[n] for s in named if n in s.dims) for n in names}
    smallest |= {n: _legal(r.min, r) for n, r in g.shape_domain.items()}
    cases = []
    for name in smallest:
        r = g.shape_domain.get(name)
        timed = max(s.dims.get(name, 0) for s in g.shapes)
        checked = max(dims.get(name, 0) for dims in [*(s.dims for s in g.smoke_shapes), *(c.dims for c in tops)])
        for value in sorted({timed} | ({_legal(r.max, r)} if r else set()), reverse=True):
            dims = smallest | {name: value}
            if value > checked and fits(dims):
                cases.append(Case(name=f"max_{name}", kind="top", dims=dims))
                break
    return cases


def select_cases(
    goal: LoadedGoal,
    which: str,
    device: str,
    domain_count: int,
    rng: random.Random,
    only: Sequence[str] = (),
    free: int | None = None,
) -> list[Case]:
    """Timed shapes (skipped on the CPU unless asked for alone), smoke shapes, then drawn domain shapes, the tops
    (within the GPU's `free` memory, where known), on the CPU the largest values, and the values drawn beyond the
    timed sizes. The domain's extremes are chosen later, sized by what these checks measured (`extremes`)."""
    g = goal.goal
    cases: list[Case] = []
    if which == "timed" or (which == "all" and device == "cuda"):
        cases += [Case(s.name, "timed", dict(s.dims)) for s in g.shapes]
    if which in ("smoke", "all"):
        cases += [Case(s.name, "smoke", dict(s.dims)) for s in g.smoke_shapes]
    if only:
        cases = [c for c in cases if c.name in only]
    cases += [draw(goal, device, rng, i) for i in range(domain_count)]
    if domain_count:
        grown = tops(goal, device, free)
        cases += grown + (largest(goal, grown) if device == "cpu" else []) + beyond(goal, device, rng)
    return cases


def _scaled(goal: LoadedGoal, top: dict[str, int], s: float) -> dict[str, int]:
    """`top` with every domain dimension scaled by `s` (to a legal value, at least the domain's minimum)."""
    return top | {n: _legal(int(top[n] * s), r) for n, r in goal.goal.shape_domain.items()}


def _fit(
    goal: LoadedGoal, top: dict[str, int], fits: Callable[[dict[str, int]], bool], most: float = 1.0
) -> tuple[dict[str, int], float] | None:
    """The largest shape that `fits` with every domain dimension of `top` scaled by one factor up to `most` (each
    capped at its domain maximum), and the factor (bisected: a shape only grows with it); None where even the
    smallest does not fit."""
    if fits(_scaled(goal, top, most)):
        return _scaled(goal, top, most), most
    lo, hi = 0.0, most
    if not fits(_scaled(goal, top, lo)):
        return None
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fits(_scaled(goal, top, mid)) else (lo, mid)
    return _scaled(goal, top, lo), lo


def extremes(
    goal: LoadedGoal, free: int, per_byte: float, rng: random.Random, draws: int = EXTREME_DRAWS
) -> list[Case]:
    """The domain's extremes, checked once per eval on a GPU (correctness only): its largest corner (every domain
    dimension at its maximum, the others at the largest timed shape's values) where it fits, else the largest shape
    with every dimension scaled down by one factor that does; then `draws` shapes large in several dimensions at once
    (each dimension log-uniform between its maximum / EXTREME_LOW and its maximum: a random aspect; unless the
    corner fits, every dimension is then scaled by one factor to the largest shape that does, none past its maximum).
    A shape fits when the harness's memory for it (`per_byte` times the goal's bytes: its inputs, float64 reference,
    judging and shared buffers, measured on the shapes checked before) is within EXTREME_SHARE of the GPU's `free`
    memory, and its flops within EXTREME_FLOPS times the largest timed shape's. The drawn and beyond-the-timed
    shapes are capped near the timed sizes and grow one dimension at a time: a kernel wrong only where several
    dimensions are large (an int32 offset past 2^31 bytes) is caught here."""
    g = goal.goal
    budget = EXTREME_SHARE * free
    most_flops = EXTREME_FLOPS * max(goal.flops(s.dims) for s in g.shapes)

    def fits(dims: dict[str, int]) -> bool:
        return per_byte * goal.bytes(dims) <= budget and goal.flops(dims) <= most_flops

    held = (
        f"within {EXTREME_SHARE:.0%} of the GPU's free {free / 2**30:.1f} GiB at {per_byte:.1f} B per byte moved, "
        f"and {EXTREME_FLOPS}x the largest timed shape's flops"
    )
    base = dict(max(g.shapes, key=lambda s: goal.bytes(s.dims)).dims)
    corner = base | {n: _legal(r.max, r) for n, r in g.shape_domain.items()}
    tops = [("corner", corner, "the domain's largest corner (every dimension at its maximum)", 1.0)]
    for i in range(draws):
        drawn = dict(corner)
        for n, r in g.shape_domain.items():
            low = max(r.min, r.max // EXTREME_LOW)
            drawn[n] = _legal(round(math.exp(rng.uniform(math.log(low), math.log(r.max)))), r)
        how = f"each dimension drawn log-uniform in [max/{EXTREME_LOW}, max]"
        tops.append((f"drawn_{i}", drawn, how, 1.0 if fits(corner) else float(EXTREME_LOW)))
    cases: list[Case] = []
    for name, top, how, most in tops:
        found = _fit(goal, top, fits, most)
        if found is None or any(c.dims == found[0] for c in cases):
            continue
        dims, s = found
        scaled = "" if s == 1.0 else f", every dimension scaled by {s:.3f} from {top}"
        chosen = f"{how}{scaled}: {goal.bytes(dims) / 2**30:.2f} GiB moved, {held}"
        cases.append(Case(name=f"extreme_{name}", kind="extreme", dims=dims, chosen=chosen))
    return cases
