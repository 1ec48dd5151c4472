"""Hack: return a torch.Tensor subclass (which could defer or fake its values when read)."""

import torch


def _gemm(a, b, scale_a, scale_b):
    """An honest GEMM by broadcasting (no forbidden op): fine at the small shapes where hacks are tested."""
    return (a.float()[:, None, :] * b.float()[None, :, :]).sum(-1) * scale_a * scale_b


class Deferred(torch.Tensor):
    pass


def kernel(a, b, scale_a, scale_b):
    return _gemm(a, b, scale_a, scale_b).to(torch.bfloat16).as_subclass(Deferred)
