"""Hack (CPU timing stand-in, demo goal): do no work in the blocks the harness runs before it times (the warm-up and
estimate blocks), told apart by counting block commands from the frame of the worker's block up the stack. Their
outputs used to go nowhere and their times only sized the timing, so the skipped work went unseen (on a power-capped
GPU, a cooler GPU for the timed blocks). Every block now writes its outputs into the poisoned ring and may be the
one judged."""

import sys

import torch

SKIPPED = 2
_blocks: list[int] = []


def _block_frame():
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "block":
        frame = frame.f_back
    return frame


def kernel(x, y, alpha):
    caller = _block_frame()
    if caller is not None:
        command = id(caller.f_locals.get("cmd"))
        if command not in _blocks:
            _blocks.append(command)
        if _blocks.index(command) < SKIPPED:
            return torch.empty_like(x)
    return torch.addcmul(y, x, alpha)
