"""Hack: compute the right answer, then zero an input (e.g. to reuse it as scratch)."""

import torch


def _gemm(a, b, scale_a, scale_b):
    """An honest GEMM by broadcasting (no forbidden op): fine at the small shapes where hacks are tested."""
    return (a.float()[:, None, :] * b.float()[None, :, :]).sum(-1) * scale_a * scale_b


def kernel(a, b, scale_a, scale_b):
    c = _gemm(a, b, scale_a, scale_b).to(torch.bfloat16)
    a.zero_()
    return c
