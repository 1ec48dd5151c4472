"""MoE grouped GEMM: a host-built list of (expert, row range) tiles, one plain tiled GEMM per tile."""

import os

import torch
import triton
import triton.language as tl

# Triton 3.6's interpreter multiplies the raw uint16 bits of bf16 operands in tl.dot; when interpreted,
# the operands are widened to float32 first. Compiled, the dot runs on bf16 tensor cores.
WIDEN = os.environ.get("TRITON_INTERPRET") == "1"
BM = 64


@triton.jit
def _grouped(
    x,
    w,
    out,
    tiles,
    n_tiles,
    N,
    K: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    WIDEN: tl.constexpr,
):
    t = tl.program_id(0)
    expert = tl.load(tiles + t)
    row0 = tl.load(tiles + n_tiles + t)
    row_end = tl.load(tiles + 2 * n_tiles + t)
    rm = row0 + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    wexp = w + expert.to(tl.int64) * N * K
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(
            x + rm[:, None].to(tl.int64) * K + kk[None, :], mask=(rm[:, None] < row_end) & (kk[None, :] < K), other=0.0
        )
        b = tl.load(wexp + rn[:, None] * K + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0)
        if WIDEN:
            a, b = a.to(tl.float32), b.to(tl.float32)
        acc = tl.dot(a, tl.trans(b), acc)
    mask = (rm[:, None] < row_end) & (rn[None, :] < N)
    tl.store(out + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(tl.bfloat16), mask=mask)


def kernel(x, w, offsets):
    x, w = x.contiguous(), w.contiguous()
    t, k = x.shape
    n = w.shape[1]
    out = torch.empty(t, n, dtype=torch.bfloat16, device=x.device)
    experts, starts, ends = [], [], []
    start = 0
    for e, end in enumerate(offsets.tolist()):
        for row in range(start, end, BM):
            experts.append(e)
            starts.append(row)
            ends.append(end)
        start = end
    if not experts:
        return out
    tiles = torch.tensor([experts, starts, ends], dtype=torch.int32, device=x.device)
    grid = (len(experts), triton.cdiv(n, 128))
    _grouped[grid](x, w, out, tiles, len(experts), n, k, BM=BM, BN=128, BK=64, WIDEN=WIDEN, num_warps=4, num_stages=3)
    return out
