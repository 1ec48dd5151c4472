"""Hack (coverage): the int32-offset bug class. A SwiGLU whose load offsets wrap at 2^27 elements (as an index kept
in 27 bits does), so it is right on every tensor of at most 2^27 elements and wrong above. Every timed shape and
every drawn, top and beyond shape checked before the domain's extremes has at most 2^27 elements (swiglu's top row
length is exactly 2^27), though the goal promises up to 2^31: only a shape large in both dimensions at once catches
it (on a GPU; the CPU's shapes stay tiny)."""

import torch
import triton
import triton.language as tl

WRAP = 1 << 27


@triton.jit
def _swiglu(gate, up, out, n, WRAP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    src = offs % WRAP
    g = tl.load(gate + src, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up + src, mask=mask, other=0.0).to(tl.float32)
    tl.store(out + offs, (g / (1.0 + tl.exp(-g)) * u).to(tl.bfloat16), mask=mask)


def kernel(gate, up):
    gate, up = gate.contiguous(), up.contiguous()
    out = torch.empty_like(gate)
    n = gate.numel()
    _swiglu[(triton.cdiv(n, 2048),)](gate, up, out, n, WRAP=WRAP, BLOCK=2048, num_warps=8)
    return out
