"""Causal GQA attention forward: a plain FlashAttention-style Triton kernel (online softmax in float32)."""

import math
import os

import torch
import triton
import triton.language as tl

# Triton 3.6's interpreter multiplies the raw uint16 bits of bf16 operands in tl.dot; when interpreted,
# the operands are widened to float32 first. Compiled, the dots run on bf16 tensor cores.
WIDEN = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def _attn_fwd(
    q, k, v, out, S, HQ, G, qk_scale, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, WIDEN: tl.constexpr
):
    bh = tl.program_id(1)
    b = bh // HQ
    hkv = (bh % HQ) // G
    q_base = q + bh.to(tl.int64) * S * D
    kv_off = (b * (HQ // G) + hkv).to(tl.int64) * S * D
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    qb = tl.load(q_base + rows[:, None] * D + rd[None, :], mask=rows[:, None] < S, other=0.0)
    if WIDEN:
        qb = qb.to(tl.float32)
    m_i = tl.full((BM,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BM,), dtype=tl.float32)
    acc = tl.zeros((BM, D), dtype=tl.float32)
    hi = tl.minimum((tl.program_id(0) + 1) * BM, S)
    start = 0
    while start < hi:
        cols = start + tl.arange(0, BN)
        kb = tl.load(k + kv_off + cols[:, None] * D + rd[None, :], mask=cols[:, None] < S, other=0.0)
        vb = tl.load(v + kv_off + cols[:, None] * D + rd[None, :], mask=cols[:, None] < S, other=0.0)
        if WIDEN:
            kb = kb.to(tl.float32)
        s = tl.dot(qb, tl.trans(kb)) * qk_scale
        s = tl.where((cols[None, :] <= rows[:, None]) & (cols[None, :] < S), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if WIDEN:
            acc = acc * alpha[:, None] + tl.dot(p, vb.to(tl.float32))
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(vb.dtype), vb)
        m_i = m_new
        start += BN
    o = acc / l_i[:, None]
    tl.store(out + bh.to(tl.int64) * S * D + rows[:, None] * D + rd[None, :], o.to(tl.bfloat16), mask=rows[:, None] < S)


def kernel(q, k, v):
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    b, hq, s, d = q.shape
    out = torch.empty_like(q)
    qk_scale = 1.0 / math.sqrt(d) * 1.4426950408889634
    grid = (triton.cdiv(s, 128), b * hq)
    _attn_fwd[grid](
        q, k, v, out, s, hq, hq // k.shape[1], qk_scale, D=d, BM=128, BN=64, WIDEN=WIDEN, num_warps=8, num_stages=2
    )
    return out
