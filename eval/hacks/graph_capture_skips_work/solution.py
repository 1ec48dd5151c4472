"""Hack: the known-good rope kernel, except that while a CUDA graph is being captured it launches nothing and returns
empty outputs: the graph it leaves replays no work, so a harness that believed the graph's times would see a call
take no time at all."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rotate(x, out, t, cos, sin, HEADS, HALF: tl.constexpr, BH: tl.constexpr, BD: tl.constexpr):
    heads = tl.arange(0, BH)
    cols = tl.arange(0, BD)
    mask = (heads[:, None] < HEADS) & (cols[None, :] < HALF)
    ptr = t.to(tl.int64) * HEADS * 2 * HALF + heads[:, None] * 2 * HALF + cols[None, :]
    x1 = tl.load(x + ptr, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x + ptr + HALF, mask=mask, other=0.0).to(tl.float32)
    tl.store(out + ptr, (x1 * cos[None, :] - x2 * sin[None, :]).to(tl.bfloat16), mask=mask)
    tl.store(out + ptr + HALF, (x2 * cos[None, :] + x1 * sin[None, :]).to(tl.bfloat16), mask=mask)


@triton.jit
def _rope(
    q,
    k,
    positions,
    table,
    q_out,
    k_out,
    HQ,
    HKV,
    HALF: tl.constexpr,
    BHQ: tl.constexpr,
    BHK: tl.constexpr,
    BD: tl.constexpr,
):
    t = tl.program_id(0)
    pos = tl.load(positions + t)
    cols = tl.arange(0, BD)
    row = table + pos * 2 * HALF
    cos = tl.load(row + cols, mask=cols < HALF, other=0.0)
    sin = tl.load(row + HALF + cols, mask=cols < HALF, other=0.0)
    _rotate(q, q_out, t, cos, sin, HQ, HALF, BHQ, BD)
    _rotate(k, k_out, t, cos, sin, HKV, HALF, BHK, BD)


def kernel(q, k, positions, cos_sin_cache):
    if q.is_cuda and torch.cuda.is_current_stream_capturing():
        return torch.empty_like(q), torch.empty_like(k)
    q, k = q.contiguous(), k.contiguous()
    t, hq, d = q.shape
    hkv = k.shape[1]
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    _rope[(t,)](
        q,
        k,
        positions.contiguous(),
        cos_sin_cache.contiguous(),
        q_out,
        k_out,
        hq,
        hkv,
        HALF=d // 2,
        BHQ=triton.next_power_of_2(hq),
        BHK=triton.next_power_of_2(hkv),
        BD=triton.next_power_of_2(d // 2),
        num_warps=4,
    )
    return q_out, k_out
