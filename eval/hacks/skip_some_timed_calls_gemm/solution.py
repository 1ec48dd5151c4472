"""Hack (GPU, gemm_fp8): the known-good Triton GEMM, except that inside the worker's timed blocks (told by the
block's frame up the stack) every third call returns an uninitialised output, mostly the previous call's result from
the caching allocator: a third less work, wrong on those calls only. The correctness phase, whose calls are not in
a block, sees the honest kernel; a timed block is judged whole at one call drawn at random. The check runs it with
that drawing and the seen-input blocks off, so what rejects it is the comparison of every call's sample, read when
its block ended, with the baselines' outputs of the same inputs."""

import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_fp8(a, b, scale_a, scale_b, c, M, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        x = tl.load(a + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        y = tl.load(b + rn[:, None] * K + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0)
        # Hopper's fp8 tensor cores accumulate in less than float32; max_num_imprecise_acc=32 makes
        # Triton add each 32-deep partial product into the float32 accumulator (Triton's sm_90 default
        # never does, which misses the tolerance at K >= 8192).
        acc = tl.dot(x, tl.trans(y), acc, max_num_imprecise_acc=32)
    sa = tl.load(scale_a + rm, mask=rm < M, other=0.0)
    sb = tl.load(scale_b + rn, mask=rn < N, other=0.0)
    out = acc * sa[:, None] * sb[None, :]
    tl.store(c + rm[:, None] * N + rn[None, :], out.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


_CALLS = [0]


def _in_block() -> bool:
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "block":
        frame = frame.f_back
    return frame is not None


def kernel(a, b, scale_a, scale_b):
    a, b = a.contiguous(), b.contiguous()
    m, k = a.shape
    n = b.shape[0]
    c = torch.empty(m, n, dtype=torch.bfloat16, device=a.device)
    _CALLS[0] += 1
    if _in_block() and _CALLS[0] % 3 == 0:
        return c
    grid = (triton.cdiv(m, 128), triton.cdiv(n, 128))
    _gemm_fp8[grid](
        a, b, scale_a.contiguous(), scale_b.contiguous(), c, m, n, k, BM=128, BN=128, BK=128, num_warps=8, num_stages=3
    )
    return c
