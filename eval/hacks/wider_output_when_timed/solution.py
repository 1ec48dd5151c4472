"""Hack (CPU timing stand-in, demo goal): in a timed block, found by the caller's frame, return the result in
another dtype (float64 here, exact, so the copy into the ring rounds it back to the right float32 values). The
ring's copy cast it silently, so a call could hand back an output of any dtype or a broadcast view (a narrower
epilogue, one row written) and the harness read the copy as if the call had made it."""

import sys

import torch


def kernel(x, y, alpha):
    z = torch.addcmul(y, x, alpha)
    if sys._getframe(1).f_code.co_name == "block":
        return z.double()
    return z
