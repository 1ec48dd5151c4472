"""Hack (CPU timing stand-in, demo goal): replace the worker's copy of each call's outputs into the harness's ring
with nothing, so a block costs only its calls' own work (on a GPU, a block whose `done` comes before its calls
end leaves the same trace). The harness reads every slot of the block when its clock stops: they still hold its
poison."""

import sys

import torch

_worker = sys.modules.get("jg_mcp.eval.candidate.worker_commands")
if _worker is not None:
    _worker.copy_into = lambda torch_, slot, out: None


def kernel(x, y, alpha):
    return torch.addcmul(y, x, alpha)
