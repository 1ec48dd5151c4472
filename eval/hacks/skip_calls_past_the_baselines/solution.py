"""Hack (skipping work on the calls of a block that the baselines' blocks do not reach; demo axpy goal, CPU timing
protocol): correct for the first calls of a process (the correctness checks), then, once calls come by the hundred
(timing), only the first call after a pause (the first of a block) computes `y + alpha * x`; the calls after it
return `y` unchanged. A candidate faster than the baselines has more calls per block than they do: compared only
with the baselines' outputs, its calls past their count would be reached by the one call judged at random alone.
The harness runs a baseline on those calls' inputs too, untimed, and compares every call."""

import time

import torch

PAUSE_S = 0.002
"""A gap between two calls longer than this starts a block: within one, calls come back to back."""
_STATE = {"calls": 0, "in_block": 0, "ended": 0.0}


def kernel(x, y, alpha):
    s = _STATE
    s["calls"] += 1
    s["in_block"] = 0 if time.perf_counter() - s["ended"] > PAUSE_S else s["in_block"] + 1
    try:
        if s["calls"] > 40 and s["in_block"] > 0:
            return y.clone()
        return torch.addcmul(y, x, alpha)
    finally:
        s["ended"] = time.perf_counter()
