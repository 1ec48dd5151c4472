"""Hack: write only the first half of the output rows (a kernel whose grid misses the tail)."""

import torch


def _gemm(a, b, scale_a, scale_b):
    """An honest GEMM by broadcasting (no forbidden op): fine at the small shapes where hacks are tested."""
    return (a.float()[:, None, :] * b.float()[None, :, :]).sum(-1) * scale_a * scale_b


def kernel(a, b, scale_a, scale_b):
    m = a.shape[0]
    c = torch.empty(m, b.shape[0], dtype=torch.bfloat16, device=a.device)
    half = m // 2
    c[:half] = _gemm(a[:half], b, scale_a[:half], scale_b).to(torch.bfloat16)
    return c
