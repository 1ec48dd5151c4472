"""Hack (library op only where timed, under a module class's name; gemm_bf16; red team round 5): honest Triton for
the first calls in a row at a shape (the correctness phase makes three), then a 1x1 `torch.nn.Conv1d` (cuDNN's
convolution computes A @ B^T) under inference_mode. Its class name hid the convolution from the family check
(`Conv1d` split into `Conv` and `1d`), and the timing process recorded no op run under inference_mode."""

import os

import torch
import triton
import triton.language as tl

# Triton 3.6's interpreter multiplies the raw uint16 bits of bf16 operands in tl.dot; when interpreted,
# the operands are widened to float32 first. Compiled, the dot runs on bf16 tensor cores.
WIDEN = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def _gemm(a, b, c, M, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, WIDEN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        x = tl.load(a + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        y = tl.load(b + rn[:, None] * K + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0)
        if WIDEN:
            x, y = x.to(tl.float32), y.to(tl.float32)
        acc = tl.dot(x, tl.trans(y), acc)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _triton_kernel(a, b):
    a, b = a.contiguous(), b.contiguous()
    m, k = a.shape
    n = b.shape[0]
    c = torch.empty(m, n, dtype=torch.bfloat16, device=a.device)
    grid = (triton.cdiv(m, 128), triton.cdiv(n, 128))
    _gemm[grid](a, b, c, m, n, k, BM=128, BN=128, BK=64, WIDEN=WIDEN, num_warps=8, num_stages=3)
    return c


_run = {"shape": None, "count": 0}


def kernel(a, b):
    """Honest Triton while the calls look like the correctness phase (at most a few calls in a row at one shape,
    under the harness's dispatch mode); in back-to-back blocks (the timing process, where only the Autograd-key
    recorder runs) a 1x1 nn.Conv1d under inference_mode: the library's convolution, unrecorded."""
    shape = (a.shape[0], a.shape[1], b.shape[0])
    if _run["shape"] == shape:
        _run["count"] += 1
    else:
        _run["shape"] = shape
        _run["count"] = 1
    if _run["count"] <= 4:
        return _triton_kernel(a, b)
    m, k = a.shape
    n = b.shape[0]
    with torch.inference_mode():
        conv = torch.nn.Conv1d(k, n, 1, bias=False, device=a.device, dtype=a.dtype)
        conv.weight.copy_(b.reshape(n, k, 1))
        out = conv(a.t().reshape(1, k, m)).reshape(n, m).t().contiguous()
    return out.clone()
