"""The input sets bound in one timing process, as the harness last wrote them, and their references.

Every timed block reads inputs no callable has seen: once the block's gate has passed, the harness writes new
inputs (new secret seeds) into the sets the block's calls read, one set per call, so no call's result could have
been computed before, in an earlier block, a lead or another call of the same block. The harness keeps what it
wrote (`groups`, its own tensors, which no worker maps): the candidate's sets are read back against them after its
blocks, and a call's outputs are judged against the reference of what it read, computed when first asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from jg_mcp.eval.wire.buffers import SharedBinding

Compute = Callable[[list[torch.Tensor]], list[torch.Tensor]]
"""A set's reference outputs from its inputs (`Evaluation.expected`)."""


class References(Sequence[list[torch.Tensor]]):
    """The reference outputs of each input set, computed when first asked for."""

    def __init__(self, compute: Compute, inputs: list[list[torch.Tensor]]):
        self.compute, self.inputs = compute, inputs
        self.done: dict[int, list[torch.Tensor]] = {}

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, i: Any) -> Any:
        if i not in self.done:
            self.done[i] = self.compute(self.inputs[i])
        return self.done[i]


class InputSets(References):
    """One process's bound input sets (`binding`, one group per set) and what the harness last wrote into each."""

    def __init__(self, compute: Compute, binding: SharedBinding, made: list[list[torch.Tensor]]):
        super().__init__(compute, list(made))
        self.binding = binding
        for group in made:
            binding.add_copy(group)

    def renewal(self, sets: Sequence[int], made: Sequence[list[torch.Tensor]]) -> Callable[[], None]:
        """What writes `made[i]` into set `sets[i]`, for the harness to run once a block's gate has passed (its
        `before_go`); from then on those sets' references are the new inputs'."""
        pairs = list(zip(sets, made, strict=True))

        def write() -> None:
            for s, group in pairs:
                for view, tensor in zip(self.binding.groups[s], group, strict=True):
                    view.copy_(tensor)
                self.inputs[s] = group
                self.done.pop(s, None)

        return write

    def intact(self) -> bool:
        """Whether every set holds what the harness last wrote (read back from the process's buffers). Compared on
        the device and read once: a `torch.equal` per tensor waits for the device once each (12,791 waits, 1.3 s,
        in one gemm_fp8 eval on an H100)."""
        pairs = [
            (view, kept)
            for views, group in zip(self.binding.groups, self.inputs, strict=True)
            for view, kept in zip(views, group, strict=True)
        ]
        if any(view.shape != kept.shape or view.dtype != kept.dtype for view, kept in pairs):
            return False
        differs = [torch.ne(view, kept).any() for view, kept in pairs]
        return not differs or not bool(torch.stack(differs).any())
