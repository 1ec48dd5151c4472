"""Row softmax for long rows: one Triton program per row, an online max/sum pass then a write pass,
both in float32."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax(x, out, N: tl.constexpr, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, N, BLOCK):
        v = tl.load(x + base + start + cols, mask=start + cols < N, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, v)
        total = total * tl.exp(m - m_new) + tl.exp(v - m_new)
        total = tl.where(m_new == float("-inf"), 0.0, total)
        m = m_new
    row_max = tl.max(m, 0)
    row_sum = tl.sum(total * tl.exp(m - row_max), 0)
    for start in range(0, N, BLOCK):
        mask = start + cols < N
        v = tl.load(x + base + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(out + base + start + cols, (tl.exp(v - row_max) / row_sum).to(tl.bfloat16), mask=mask)


def kernel(x):
    x = x.contiguous()
    n = x.shape[-1]
    out = torch.empty_like(x)
    rows = x.numel() // n
    block = min(4096, triton.next_power_of_2(n))
    _softmax[(rows,)](x, out, n, BLOCK=block, num_warps=8 if block >= 2048 else 4)
    return out
