"""MoE grouped GEMM, bf16: rows of X are tokens sorted by expert; group e multiplies its rows by W[e]^T.

offsets[e] is the end row of group e (cumulative, int32), so group e is X[offsets[e-1]:offsets[e]].
Groups are uneven and may be empty, as top-k routing produces; their sizes are fixed by the shape (`group_sizes`).
"""

import math
from statistics import NormalDist

import torch

SPARSE_ROWS_PER_EXPERT = 64
"""Below this many rows per expert on average, the coldest expert gets none, as top-k routing of a small batch
leaves some experts idle (decode); at larger batches every expert gets rows."""


def group_sizes(t: int, e: int) -> list[int]:
    """The rows each expert gets, coldest first: a fixed skewed routing of `t` rows over `e` experts, the same for
    every seed. Expert popularity is a softmax of evenly spaced Gaussian quantiles (scale 0.8: the hottest of 8
    experts gets about 12 times the rows of the coldest), rounded to whole rows by largest remainder.

    Fixed, because a grouped GEMM's time depends on its group sizes (each group's rows are cut into tiles, and the
    last tile of each is partly idle), so every eval of a shape times the same work: on the H200, torch._grouped_mm
    at the Mixtral shape took 0.743-0.812 ms over twelve evals with sizes drawn from the seed, and 0.796 and 0.801
    ms in two evals with these (eval/results/h200/check.md, run 23). The seed still decides which expert gets
    which size, and every value."""
    quantiles = [NormalDist().inv_cdf((i + 0.5) / e) for i in range(e)]
    weights = [math.exp(0.8 * q) for q in quantiles]
    exact = [t * w / sum(weights) for w in weights]
    sizes = [math.floor(x) for x in exact]
    by_remainder = sorted(range(e), key=lambda i: (sizes[i] - exact[i], -i))
    for i in by_remainder[: t - sum(sizes)]:
        sizes[i] += 1
    if e > 1 and t < SPARSE_ROWS_PER_EXPERT * e:
        sizes[-1] += sizes[0]
        sizes[0] = 0
    return sizes


def make_inputs(dims: dict, seed: int, device: str):
    """X (T, K) bf16, W (E, N, K) bf16 in the nn.Linear layout, offsets (E,) int32 cumulative ends.

    The group sizes are `group_sizes(T, E)` in an expert order drawn from the seed: the work is the same in every
    eval, which expert is hot (or idle) and every value are not.
    """
    t, e, n, k = dims["T"], dims["E"], dims["N"], dims["K"]
    g = torch.Generator(device=device).manual_seed(seed)
    with torch.device(device):  # generate where the kernel runs: large inputs in milliseconds
        order = torch.randperm(e, generator=g)
        sizes = torch.tensor(group_sizes(t, e), dtype=torch.int64)[order.cpu()]
        offsets = torch.cumsum(sizes, dim=0).to(torch.int32)
        x = torch.randn(t, k, generator=g) * k**-0.25
        w = torch.randn(e, n, k, generator=g) * k**-0.25
        return x.to(device, torch.bfloat16), w.to(device, torch.bfloat16), offsets.to(device)


def make_edge_inputs(dims: dict, seed: int, device: str):
    """`make_inputs` with another routing: the rows split over the experts by a random draw (some experts idle, one
    taking most), so a kernel sized by `group_sizes` instead of the offsets leaves rows unwritten."""
    x, w, offsets = make_inputs(dims, seed, device)
    t, e = dims["T"], dims["E"]
    g = torch.Generator(device="cpu").manual_seed(seed ^ 0x5EED)
    weights = torch.rand(e, generator=g) ** 4
    sizes = torch.bincount(torch.multinomial(weights, t, replacement=True, generator=g), minlength=e)
    return x, w, torch.cumsum(sizes, dim=0).to(torch.int32).to(offsets.device)


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
    """The plain MoE implementation: one torch.matmul (cuBLAS) per expert, the largest groups launched first.

    Reading the offsets waits for the GPU, which then idles until the host launches the first matmul; launched in
    expert order, a small group (tens of microseconds of work) often comes first and the GPU keeps waiting on the
    host's launches, so the loop's time followed the host: 0.740-0.850 ms at the Mixtral shape on the H200 (run
    23), 11% apart in two evals. Largest first, the host queues the rest while the GPU works on the largest."""
    out = torch.empty(x.shape[0], w.shape[1], dtype=torch.bfloat16, device=x.device)
    ends = offsets.tolist()
    groups = [(end - start, e, start, end) for e, (start, end) in enumerate(zip([0, *ends[:-1]], ends, strict=True))]
    for rows, e, start, end in sorted(groups, reverse=True):
        if rows > 0:
            torch.matmul(x[start:end], w[e].t(), out=out[start:end])
    return out


def flops(dims: dict) -> float:
    return 2.0 * dims["T"] * dims["N"] * dims["K"]


def bytes_moved(dims: dict) -> float:
    t, e, n, k = dims["T"], dims["E"], dims["N"], dims["K"]
    return 2.0 * (t * k + e * n * k + t * n) + 4 * e
