"""One timed shape's bench: what its timing holds from its first block to its last, per-call and under CUDA graphs
alike, and frees at its end: the shape (its case and its result), the outputs' layout, each side's bindings (input
sets and output ring) and its input sets as the harness last wrote them. Each shape has one; nothing of it outlives
the shape (jg_mcp/eval/timing.py makes it, jg_mcp/eval/timing_checks.py and graphs.py read it)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from jg_mcp.eval.input_sets import InputSets
from jg_mcp.eval.report import ShapeResult
from jg_mcp.eval.shapes import Case
from jg_mcp.eval.turns import CANDIDATE, SIDES
from jg_mcp.eval.wire.buffers import SharedBinding


@dataclass
class Bench:
    """One timed shape's state (see the module's docstring)."""

    case: Case
    shape: ShapeResult
    like: list[torch.Tensor]
    """The shape's outputs as the goal lays them out (`Evaluation.output_like`): the rings' slots."""
    sides: dict[str, dict[str, SharedBinding]]
    """Each side's bindings (`tin`: input sets, `ring`: output ring), each a copy the harness made."""
    ins: dict[str, InputSets] = field(default_factory=dict)
    """Each side's input sets, as the harness last wrote them."""

    @classmethod
    def empty(cls, case: Case, shape: ShapeResult, like: list[torch.Tensor], device: str) -> Bench:
        """A bench whose bindings hold nothing yet."""
        return cls(case, shape, like, {side: {n: SharedBinding(n, device) for n in ("tin", "ring")} for side in SIDES})

    @property
    def ring(self) -> SharedBinding:
        """The candidate's output ring, which the harness reads after its blocks."""
        return self.sides[CANDIDATE]["ring"]

    @property
    def own(self) -> InputSets:
        """The candidate's input sets, which the harness reads back after its blocks."""
        return self.ins[CANDIDATE]

    def free(self) -> None:
        self.ins = {}
        for bindings in self.sides.values():
            for binding in bindings.values():
                binding.free()


@contextlib.contextmanager
def walled(shape: ShapeResult, part: str) -> Iterator[None]:
    """Add the wall time of what it wraps to the shape's `wall_s[part]` (a part may run in both timings of a shape)."""
    mark = time.monotonic()
    try:
        yield
    finally:
        shape.wall_s[part] = shape.wall_s.get(part, 0.0) + time.monotonic() - mark
