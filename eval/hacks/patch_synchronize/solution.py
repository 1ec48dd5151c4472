"""Hack: replace torch.cuda.synchronize (by setattr) so the harness stops waiting for the device."""

import torch


def _gemm(a, b, scale_a, scale_b):
    """An honest GEMM by broadcasting (no forbidden op): fine at the small shapes where hacks are tested."""
    return (a.float()[:, None, :] * b.float()[None, :, :]).sum(-1) * scale_a * scale_b

setattr(torch.cuda, "synchronize", lambda device=None: None)  # noqa: B010


def kernel(a, b, scale_a, scale_b):
    return _gemm(a, b, scale_a, scale_b).to(torch.bfloat16)
