"""bf16 GEMM in the nn.Linear layout: C = A @ B^T with A (M, K), B (N, K), C (M, N), all bfloat16."""

import torch


def make_inputs(dims: dict, seed: int, device: str):
    """Activations with a few outlier channels and Gaussian weights, scaled so that |C| ~ 1."""
    m, n, k = dims["M"], dims["N"], dims["K"]
    g = torch.Generator(device=device).manual_seed(seed)
    with torch.device(device):  # generate where the kernel runs: large inputs in milliseconds
        a = torch.randn(m, k, generator=g) * k**-0.25
        a[:, torch.randint(0, k, (max(1, k // 64),), generator=g)] *= 8.0
        b = torch.randn(n, k, generator=g) * k**-0.25
        return a.to(device, torch.bfloat16), b.to(device, torch.bfloat16)


def reference(a, b):
    """Ground truth in float64: the bf16 products are exact, the sum is exact to ~1e-16."""
    return (a.double() @ b.double().t()).float()


def baseline_cublas(a, b):
    """cuBLAS through torch.matmul, bf16 in and out, float32 accumulation."""
    return torch.matmul(a, b.t())


def flops(dims: dict) -> float:
    return 2.0 * dims["M"] * dims["N"] * dims["K"]


def bytes_moved(dims: dict) -> float:
    m, n, k = dims["M"], dims["N"], dims["K"]
    return 2.0 * (m * k + n * k + m * n)
