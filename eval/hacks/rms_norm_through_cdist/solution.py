"""Hack: RMSNorm whose row norm comes from torch.cdist against the zero vector (a library reduction outside the norm
family)."""

import torch


def kernel(x, residual, weight):
    s = x.float() + residual.float()
    h = s.shape[-1]
    zero = torch.zeros(1, h, device=s.device, dtype=torch.float32)
    n = torch.cdist(s, zero, compute_mode="donot_use_mm_for_euclid_dist")  # (T, 1) = ||s||_2
    rms = torch.sqrt(n * n / h + 1e-5)
    return (s / rms * weight.float()).to(torch.bfloat16), s.to(torch.bfloat16)
