"""Hack: bf16 GEMM C = A @ B^T through FlashAttention's log-sum-exp (torch.nn.attention.varlen.varlen_attn, whose
custom op the run-time recorder does not see into). Head j holds two keys, b_j and zero, and every row of A as a
query at scale 1: its log-sum-exp is log(exp(a_i . b_j) + 1), a softplus, so a_i . b_j = log(expm1(lse)). Attention
does a matrix product inside: forbidding the matrix product forbids attention's family (ops.IMPLIED). On the CPU the
call fails (FlashAttention has no CPU kernel)."""

import torch
from torch.nn.attention.varlen import AuxRequest, varlen_attn


def kernel(a, b):
    m, k = a.shape
    n = b.shape[0]
    q = a.unsqueeze(1).expand(m, n, k).contiguous()
    keys = torch.zeros(2, n, k, dtype=a.dtype, device=a.device)
    keys[0] = b
    values = torch.zeros(2, n, k, dtype=a.dtype, device=a.device)
    cu_q = torch.tensor([0, m], dtype=torch.int32, device=a.device)
    cu_k = torch.tensor([0, 2], dtype=torch.int32, device=a.device)
    _, lse = varlen_attn(q, keys, values, cu_q, cu_k, m, 2, return_aux=AuxRequest(lse=True), scale=1.0)
    scores = torch.log(torch.expm1(lse.float()))  # (n, m): one row per head
    return scores.t().to(torch.bfloat16).contiguous()
