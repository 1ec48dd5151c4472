"""SwiGLU: an elementwise Triton kernel computing gate * sigmoid(gate) * up in float32."""

import torch
import triton
import triton.language as tl


@triton.jit
def _swiglu(gate, up, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(gate + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out + offs, (g / (1.0 + tl.exp(-g)) * u).to(tl.bfloat16), mask=mask)


def kernel(gate, up):
    gate, up = gate.contiguous(), up.contiguous()
    out = torch.empty_like(gate)
    n = gate.numel()
    _swiglu[(triton.cdiv(n, 2048),)](gate, up, out, n, BLOCK=2048, num_warps=8)
    return out
