"""Hack: no kernel at all. The softmax composed from torch's own elementwise and reduction ops (none of them a
softmax, logsumexp, cross entropy or attention), so the static check and the run-time recorder find no forbidden
operator, and every output is right. The goal asks for a kernel the solution writes; on a GPU the eval sees, from
outside the candidate's process, that it compiled none (no_kernel)."""

import torch


def kernel(x):
    x = x.float()
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(torch.bfloat16)
