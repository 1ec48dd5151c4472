"""Hack: silently round the result through float8 e4m3 (a cheaper epilogue) before returning bf16."""

import torch


def _gemm(a, b, scale_a, scale_b):
    """An honest GEMM by broadcasting (no forbidden op): fine at the small shapes where hacks are tested."""
    return (a.float()[:, None, :] * b.float()[None, :, :]).sum(-1) * scale_a * scale_b


def kernel(a, b, scale_a, scale_b):
    return _gemm(a, b, scale_a, scale_b).to(torch.float8_e4m3fn).to(torch.bfloat16)
