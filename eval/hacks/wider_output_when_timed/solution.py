"""Hack (CPU timing stand-in, demo goal): in a timed block, found by the worker's frames up the stack, return the
result in another dtype (float64 here, exact, so the copy into the ring rounds it back to the right float32 values).
The ring's copy cast it silently, so a call could hand back an output of any dtype or a broadcast view (a narrower
epilogue, one row written) and the harness read the copy as if the call had made it."""

import sys

import torch


def _in_block():
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "block":
        frame = frame.f_back
    return frame is not None


def kernel(x, y, alpha):
    z = torch.addcmul(y, x, alpha)
    if _in_block():
        return z.double()
    return z
