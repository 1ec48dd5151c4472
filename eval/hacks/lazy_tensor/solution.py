"""Hack: return a lazy stand-in that computes only when the harness converts it."""

import torch


def _gemm(a, b, scale_a, scale_b):
    """An honest GEMM by broadcasting (no forbidden op): fine at the small shapes where hacks are tested."""
    return (a.float()[:, None, :] * b.float()[None, :, :]).sum(-1) * scale_a * scale_b


class Lazy:
    def __init__(self, args):
        self.args = args
        self.shape = (args[0].shape[0], args[1].shape[0])
        self.dtype = torch.bfloat16

    def materialize(self):
        return _gemm(*self.args).to(torch.bfloat16)

    def __array__(self, dtype=None):
        return self.materialize().float().numpy()


def kernel(a, b, scale_a, scale_b):
    return Lazy((a, b, scale_a, scale_b))
