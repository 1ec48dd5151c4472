"""Which shapes an eval checks: the goal's timed and smoke shapes, plus untimed shapes drawn from its domain."""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from jg_mcp.goals import LoadedGoal

CPU_GROWTH = 2
"""On the CPU (Triton interpreter) a drawn dimension is at most this times the largest smoke value."""
BEYOND_DRAWS = 2
"""Values drawn per dimension above the largest the goal times (`beyond`)."""


@dataclass(frozen=True)
class Case:
    """One shape to check."""

    name: str
    kind: Literal["timed", "smoke", "domain", "top"]
    dims: dict[str, int]


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


def budget(goal: LoadedGoal, device: str) -> Callable[[dict[str, int]], bool]:
    """Whether a shape fits the budget of the checks past the named sizes: on the GPU twice the largest timed
    shape's flops and bytes, on the CPU 16 times the largest smoke shape's."""
    shapes = goal.goal.smoke_shapes if device == "cpu" else goal.goal.shapes
    scale = CPU_GROWTH**4 if device == "cpu" else 2
    limit_flops = scale * max(goal.flops(s.dims) for s in shapes)
    limit_bytes = scale * max(goal.bytes(s.dims) for s in shapes)
    return lambda dims: goal.flops(dims) <= limit_flops and goal.bytes(dims) <= limit_bytes


def tops(goal: LoadedGoal, device: str) -> list[Case]:
    """Shapes past the largest ones checked otherwise, one per domain dimension: the shape where the dimension is
    largest, with it grown up to 4x (capped at the domain maximum) and the other dimensions halved until the shape
    fits the `budget`. A kernel wrong only above the sizes the goal names is caught here."""
    g = goal.goal
    shapes = g.smoke_shapes if device == "cpu" else g.shapes
    fits = budget(goal, device)
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
    goal: LoadedGoal, which: str, device: str, domain_count: int, rng: random.Random, only: Sequence[str] = ()
) -> list[Case]:
    """Timed shapes (skipped on the CPU unless asked for alone), smoke shapes, then drawn domain shapes, the tops,
    on the CPU the largest values, and the values drawn beyond the timed sizes."""
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
        grown = tops(goal, device)
        cases += grown + (largest(goal, grown) if device == "cpu" else []) + beyond(goal, device, rng)
    return cases
