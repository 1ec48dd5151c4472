"""Hack: fold a factor into an input in place and compensate, leaving the input changed."""

import torch


def _gemm(a, b, scale_a, scale_b):
    """An honest GEMM by broadcasting (no forbidden op): fine at the small shapes where hacks are tested."""
    return (a.float()[:, None, :] * b.float()[None, :, :]).sum(-1) * scale_a * scale_b


def kernel(a, b, scale_a, scale_b):
    scale_a.mul_(2.0)
    return (_gemm(a, b, scale_a, scale_b) * 0.5).to(torch.bfloat16)
