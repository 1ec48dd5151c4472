"""MoE grouped GEMM: one launch over an upper bound of row tiles; each program finds its expert from the offsets."""

import os

import torch
import triton
import triton.language as tl

# Triton 3.6's interpreter multiplies the raw uint16 bits of bf16 operands in tl.dot; when interpreted,
# the operands are widened to float32 first. Compiled, the dot runs on bf16 tensor cores.
WIDEN = os.environ.get("TRITON_INTERPRET") == "1"
BM = 64
BN = 128


@triton.jit
def _grouped(
    x,
    w,
    out,
    offsets,
    E,
    N,
    K: tl.constexpr,
    EB: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    WIDEN: tl.constexpr,
):
    # Tiles are numbered group by group: group e owns cdiv(size_e, BM) consecutive tile indices.
    t = tl.program_id(0)
    e = tl.arange(0, EB)
    ends = tl.load(offsets + e, mask=e < E, other=0)
    starts = tl.load(offsets + e - 1, mask=(e > 0) & (e < E), other=0)
    tiles = (ends - starts + BM - 1) // BM
    last = tl.cumsum(tiles, 0)
    if t >= tl.sum(tiles):
        return
    expert = tl.sum((last <= t).to(tl.int32))
    mine = e == expert
    first_tile = tl.sum(tl.where(mine, last - tiles, 0))
    row0 = tl.sum(tl.where(mine, starts, 0)) + (t - first_tile) * BM
    row_end = tl.sum(tl.where(mine, ends, 0))
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
    x, w, offsets = x.contiguous(), w.contiguous(), offsets.contiguous()
    t, k = x.shape
    e, n = w.shape[0], w.shape[1]
    out = torch.empty(t, n, dtype=torch.bfloat16, device=x.device)
    # Sum over groups of cdiv(size, BM) is at most cdiv(T, BM) + E; programs past the real count return at once.
    grid = (triton.cdiv(t, BM) + e, triton.cdiv(n, BN))
    eb = max(16, triton.next_power_of_2(e))
    _grouped[grid](x, w, out, offsets, e, n, k, EB=eb, BM=BM, BN=BN, BK=64, WIDEN=WIDEN, num_warps=4, num_stages=3)
    return out
