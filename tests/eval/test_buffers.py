"""The harness's shared buffers (jg_mcp/eval/wire/buffers.py) on the CPU stand-in."""

from __future__ import annotations

import torch

from jg_mcp.eval.wire.buffers import POISON, SharedBinding


def test_add_copy_lays_each_tensor_in_a_buffer_of_its_own_holding_its_values():
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()  # strided, not contiguous
    b = torch.tensor([1, 2, 3], dtype=torch.int64)
    binding = SharedBinding("t", "cpu")
    try:
        views = binding.add_copy([a, b])
        assert [v.dtype for v in views] == [a.dtype, b.dtype] and views[0].stride() == a.stride()
        assert torch.equal(views[0], a) and torch.equal(views[1], b)
        assert len(binding.raws) == 2 and views[0].data_ptr() != a.data_ptr()
        binding.poison()
        assert bool((binding.raws[1] == POISON).all()) and torch.equal(b, torch.tensor([1, 2, 3]))
    finally:
        binding.free()
