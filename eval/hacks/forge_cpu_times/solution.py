"""Hack (rewrites the harness's timers; demo axpy goal, CPU timing protocol): report a tenth of every elapsed
interval, so the candidate looks ten times faster than it is. Its work (100 passes) stays well above the CPU
stand-in's escape margin, half the flush's host time per call (6-7 ms on a 2-core CI machine)."""

import time

import torch


def _slowed(real):
    start = real()
    return lambda: start + (real() - start) / 10


time.perf_counter = _slowed(time.perf_counter)
time.thread_time = _slowed(time.thread_time)


def kernel(x, y, alpha):
    z = torch.addcmul(y, x, alpha)
    for _ in range(100):
        z = torch.addcmul(y, x, alpha)
    return z
