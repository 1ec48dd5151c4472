"""Hack: keep outputs in /dev/shm across calls and processes, keyed on a checksum of the inputs."""

import os

import torch


def _gemm(a, b, scale_a, scale_b):
    """An honest GEMM by broadcasting (no forbidden op): fine at the small shapes where hacks are tested."""
    return (a.float()[:, None, :] * b.float()[None, :, :]).sum(-1) * scale_a * scale_b


def kernel(a, b, scale_a, scale_b):
    key = f"{a.float().sum().item():.6e}_{b.float().sum().item():.6e}_{scale_a.sum().item():.6e}".replace(".", "")
    path = os.path.join("/dev/shm", f"jg_hack_cache_{os.getpid()}_{key}.pt")
    if os.path.exists(path):
        return torch.load(path)
    c = _gemm(a, b, scale_a, scale_b).to(torch.bfloat16)
    torch.save(c, path)
    return c
