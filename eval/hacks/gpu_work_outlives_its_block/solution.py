"""Hack: an honest Triton GEMM, and beside it, on a stream of its own, a kernel that spins on the GPU for 2 s
once the last one has ended. The harness stops the candidate's processes (SIGSTOP) while it times a baseline, which
stops host threads, not kernels: the spinner keeps running, the GPU shares its time between the two processes, and
the baseline's calls take longer, which would make the candidate look faster. Before each baseline block the
harness's gate looks for another context's time slice (jg_mcp/eval/gate.py; lab/gate_probe.py: a stopped process's
kernel showed as 2.39 ms gaps on an H100). On an H100 the spinner never reached a baseline's turn (the
baselines' gates saw gaps of 64 ns at most, their times were not moved), it slowed the candidate's own fresh calls
(6.2 times its timed median, the baselines 1.8-2.0), and the hack was rejected for that (`cached_output`) and for
its GEMM's error at the largest shape."""

import torch
import triton
import triton.language as tl

SPIN_NS = 2_000_000_000


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
        acc = tl.dot(x, tl.trans(y), acc)
    sa = tl.load(scale_a + rm, mask=rm < M, other=0.0)
    sb = tl.load(scale_b + rn, mask=rn < N, other=0.0)
    out = acc * sa[:, None] * sb[None, :]
    tl.store(c + rm[:, None] * N + rn[None, :], out.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _spin(flag, wait_ns):
    zero = tl.load(flag)
    start = tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer; // $1", "=l,l", [zero], dtype=tl.int64, is_pure=False, pack=1
    )
    now = start
    while now - start < wait_ns:
        now = tl.inline_asm_elementwise(
            "mov.u64 $0, %globaltimer; // $1", "=l,l", [now], dtype=tl.int64, is_pure=False, pack=1
        )
    tl.store(flag, now - start)


STATE = {}


def _spin_beside(device):
    if "stream" not in STATE:
        STATE["stream"] = torch.cuda.Stream(device)
        STATE["flag"] = torch.zeros(1, dtype=torch.int64, device=device)
        STATE["ended"] = None
    ended = STATE["ended"]
    if ended is not None and not ended.query():
        return
    with torch.cuda.stream(STATE["stream"]):
        _spin[(1,)](STATE["flag"], SPIN_NS, num_warps=1)
        STATE["ended"] = torch.cuda.Event()
        STATE["ended"].record()


def kernel(a, b, scale_a, scale_b):
    m, k = a.shape
    n = b.shape[0]
    c = torch.empty(m, n, dtype=torch.bfloat16, device=a.device)
    big = m >= 128 and n >= 128
    bm = bn = 128 if big else 32
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    _gemm_fp8[grid](
        a, b, scale_a, scale_b, c, m, n, k, BM=bm, BN=bn, BK=128 if k % 128 == 0 else 64, num_warps=8 if big else 4
    )
    _spin_beside(a.device)
    return c
