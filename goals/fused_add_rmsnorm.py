"""Residual add + RMSNorm, bf16 in and out (the pre-norm of every transformer block).

new_residual = x + residual
normed = new_residual / sqrt(mean(new_residual^2) + EPS) * weight
Returns (normed, new_residual), both bfloat16, shapes (T, H).
"""

import functools

import torch
import torch.nn.functional as F

EPS = 1e-5


def make_inputs(dims: dict, seed: int, device: str):
    """x: a layer's output; residual: the residual stream, larger and with outlier channels;
    weight: a trained-looking norm gain around 1."""
    t, h = dims["T"], dims["H"]
    g = torch.Generator(device=device).manual_seed(seed)
    with torch.device(device):  # generate where the kernel runs: large inputs in milliseconds
        x = torch.randn(t, h, generator=g)
        residual = torch.randn(t, h, generator=g) * 3.0
        residual[:, torch.randint(0, h, (max(1, h // 256),), generator=g)] *= 20.0
        weight = 1.0 + 0.2 * torch.randn(h, generator=g)
        return x.to(device, torch.bfloat16), residual.to(device, torch.bfloat16), weight.to(device, torch.bfloat16)


def make_edge_inputs(dims: dict, seed: int, device: str):
    """`make_inputs` with about one row in eight all zero in both x and residual (padding tokens): its norm is 0,
    and only the eps keeps the output from 0 / 0."""
    x, residual, weight = make_inputs(dims, seed, device)
    g = torch.Generator(device="cpu").manual_seed(seed ^ 0x5EED)
    rows = torch.rand(x.shape[0], generator=g) < 0.125
    rows[torch.randint(0, x.shape[0], (1,), generator=g)] = True
    rows = rows.to(x.device)
    return x.masked_fill(rows[:, None], 0), residual.masked_fill(rows[:, None], 0), weight


def reference(x, residual, weight):
    """float64 throughout."""
    s = x.double() + residual.double()
    normed = s / torch.sqrt((s * s).mean(dim=-1, keepdim=True) + EPS) * weight.double()
    return normed.float(), s.float()


def add_rmsnorm_fp32(x, residual, weight):
    """The usual PyTorch module code: add, then normalise in float32, round once at the end."""
    s = x.float() + residual.float()
    normed = s * torch.rsqrt(s.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()
    return normed.to(torch.bfloat16), s.to(torch.bfloat16)


@functools.cache
def _compiled():
    """Pointwise kernels keep Inductor's first config: picked by a benchmark at the first run, it changed between
    processes and hosts on the H200 (docs/decisions/2026-12-02-pointwise-autotune-off.md)."""
    return torch.compile(add_rmsnorm_fp32, dynamic=False, options={"triton.autotune_pointwise": False})


def baseline_compiled(x, residual, weight):
    """torch.compile (Inductor, one fused Triton kernel) of the float32 module code."""
    return _compiled()(x, residual, weight)


def baseline_eager(x, residual, weight):
    """Eager PyTorch: bf16 add, then the fused F.rms_norm op."""
    s = x + residual
    return F.rms_norm(s, (s.shape[-1],), weight, EPS), s


def flops(dims: dict) -> float:
    """Add, square, sum, scale by the inverse norm and the weight: about 5 per element."""
    return 5.0 * dims["T"] * dims["H"]


def bytes_moved(dims: dict) -> float:
    t, h = dims["T"], dims["H"]
    return 2.0 * (4 * t * h + h)
