"""SwiGLU activation of a gated MLP: out = silu(gate) * up, bf16 in and out, shapes (T, I)."""

import functools

import torch
import torch.nn.functional as F


def make_inputs(dims: dict, seed: int, device: str):
    """gate and up: projection outputs, Gaussian with standard deviation 2 (a realistic pre-activation spread)."""
    t, i = dims["T"], dims["I"]
    g = torch.Generator(device=device).manual_seed(seed)
    with torch.device(device):  # generate where the kernel runs: large inputs in milliseconds
        gate = torch.randn(t, i, generator=g) * 2.0
        up = torch.randn(t, i, generator=g) * 2.0
        return gate.to(device, torch.bfloat16), up.to(device, torch.bfloat16)


def make_edge_inputs(dims: dict, seed: int, device: str):
    """`make_inputs` with one gate value in ten scaled by 25 (|gate| up to about 200): silu(gate) is about 0 or gate
    there, which an approximate sigmoid fitted to the usual spread gets wrong."""
    gate, up = make_inputs(dims, seed, device)
    g = torch.Generator(device=device).manual_seed(seed ^ 0x5EED)
    with torch.device(device):
        wide = torch.rand(gate.shape, generator=g) < 0.1
    return torch.where(wide, gate.float() * 25.0, gate.float()).to(torch.bfloat16), up


def reference(gate, up):
    """float64: gate * sigmoid(gate) * up, written out."""
    gd = gate.double()
    return (gd / (1.0 + torch.exp(-gd)) * up.double()).float()


def swiglu_eager(gate, up):
    """The module code (Llama's MLP): F.silu(gate) * up on bf16 tensors."""
    return F.silu(gate) * up


@functools.cache
def _compiled():
    """Pointwise kernels keep Inductor's first config: picked by a benchmark at the first run, it changed between
    processes and hosts on the H200 (docs/decisions/2026-12-02-pointwise-autotune-off.md)."""
    return torch.compile(swiglu_eager, dynamic=False, options={"triton.autotune_pointwise": False})


def baseline_compiled(gate, up):
    """torch.compile (Inductor, one fused Triton kernel) of F.silu(gate) * up."""
    return _compiled()(gate, up)


def flops(dims: dict) -> float:
    """Negate, exp, add, divide, multiply: about 5 per element."""
    return 5.0 * dims["T"] * dims["I"]


def bytes_moved(dims: dict) -> float:
    return 2.0 * 3 * dims["T"] * dims["I"]
