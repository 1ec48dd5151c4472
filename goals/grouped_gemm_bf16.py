"""MoE grouped GEMM, bf16: rows of X are tokens sorted by expert; group e multiplies its rows by W[e]^T.

offsets[e] is the end row of group e (cumulative, int32), so group e is X[offsets[e-1]:offsets[e]].
Groups are uneven and may be empty, as top-k routing produces.
"""

import torch


def make_inputs(dims: dict, seed: int, device: str):
    """X (T, K) bf16, W (E, N, K) bf16 in the nn.Linear layout, offsets (E,) int32 cumulative ends.

    Group sizes follow a skewed router: expert popularity is a softmax of Gaussian logits, and each
    of the T routed rows picks an expert from it, so some experts are hot and some get no rows.
    """
    t, e, n, k = dims["T"], dims["E"], dims["N"], dims["K"]
    g = torch.Generator(device=device).manual_seed(seed)
    with torch.device(device):  # generate where the kernel runs: large inputs in milliseconds
        popularity = torch.softmax(torch.randn(e, generator=g) * 0.8, dim=0)
        choice = torch.multinomial(popularity, t, replacement=True, generator=g)
        offsets = torch.cumsum(torch.bincount(choice, minlength=e), dim=0).to(torch.int32)
        x = torch.randn(t, k, generator=g) * k**-0.25
        w = torch.randn(e, n, k, generator=g) * k**-0.25
        return x.to(device, torch.bfloat16), w.to(device, torch.bfloat16), offsets.to(device)


def reference(x, w, offsets):
    """Ground truth in float64, one expert at a time."""
    out = torch.empty(x.shape[0], w.shape[1], dtype=torch.float64, device=x.device)
    start = 0
    for e, end in enumerate(offsets.tolist()):
        out[start:end] = x[start:end].double() @ w[e].double().t()
        start = end
    return out.float()


def baseline_grouped_mm(x, w, offsets):
    """torch._grouped_mm: one CUTLASS grouped-GEMM launch for all experts."""
    return torch._grouped_mm(x, w.transpose(-2, -1), offs=offsets, out_dtype=torch.bfloat16)


def baseline_matmul_loop(x, w, offsets):
    """The plain MoE implementation: one torch.matmul (cuBLAS) per expert."""
    out = torch.empty(x.shape[0], w.shape[1], dtype=torch.bfloat16, device=x.device)
    start = 0
    for e, end in enumerate(offsets.tolist()):
        if end > start:
            torch.matmul(x[start:end], w[e].t(), out=out[start:end])
        start = end
    return out


def flops(dims: dict) -> float:
    return 2.0 * dims["T"] * dims["N"] * dims["K"]


def bytes_moved(dims: dict) -> float:
    t, e, n, k = dims["T"], dims["E"], dims["N"], dims["K"]
    return 2.0 * (t * k + e * n * k + t * n) + 4 * e
