"""Demo goal: z = alpha * x + y over float32 vectors (small enough for the Triton interpreter)."""

import torch


def make_inputs(dims: dict, seed: int, device: str):
    g = torch.Generator(device="cpu").manual_seed(seed)
    n = dims["N"]
    x = torch.randn(n, generator=g)
    y = torch.randn(n, generator=g)
    alpha = torch.rand(1, generator=g) * 4 - 2
    return x.to(device), y.to(device), alpha.to(device)


def reference(x, y, alpha):
    return (alpha.double() * x.double() + y.double()).float()


def baseline_torch(x, y, alpha):
    return torch.add(y, x, alpha=alpha.item())


def flops(dims: dict) -> float:
    return 2.0 * dims["N"]


def bytes_moved(dims: dict) -> float:
    return 12.0 * dims["N"]
