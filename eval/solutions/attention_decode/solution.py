"""Decode attention over a padded KV cache: one program per (sequence, kv head) handles that head's
G query heads together, walking the valid cache prefix with an online softmax in float32."""

import math
import os

import torch
import triton
import triton.language as tl

# Triton 3.6's interpreter multiplies the raw uint16 bits of bf16 operands in tl.dot; when interpreted,
# the operands are widened to float32 first. Compiled, the dots run on bf16 tensor cores.
WIDEN = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def _decode(
    q, k, v, lens, out, HKV, G, SMAX, qk_scale, D: tl.constexpr, BG: tl.constexpr, BN: tl.constexpr, WIDEN: tl.constexpr
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    n = tl.load(lens + b)
    rg = tl.arange(0, BG)
    rd = tl.arange(0, D)
    q_rows = (b * HKV + h) * G + rg
    qb = tl.load(q + q_rows[:, None] * D + rd[None, :], mask=rg[:, None] < G, other=0.0)
    if WIDEN:
        qb = qb.to(tl.float32)
    kv = (b * HKV + h).to(tl.int64) * SMAX * D
    m_i = tl.full((BG,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BG,), dtype=tl.float32)
    acc = tl.zeros((BG, D), dtype=tl.float32)
    start = 0
    while start < n:
        cols = start + tl.arange(0, BN)
        kb = tl.load(k + kv + cols[:, None] * D + rd[None, :], mask=cols[:, None] < n, other=0.0)
        vb = tl.load(v + kv + cols[:, None] * D + rd[None, :], mask=cols[:, None] < n, other=0.0)
        if WIDEN:
            kb = kb.to(tl.float32)
        s = tl.dot(qb, tl.trans(kb)) * qk_scale
        s = tl.where(cols[None, :] < n, s, float("-inf"))
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
    tl.store(out + q_rows[:, None] * D + rd[None, :], o.to(tl.bfloat16), mask=rg[:, None] < G)


def kernel(q, k_cache, v_cache, cache_lens):
    q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
    b, hq, d = q.shape
    hkv, smax = k_cache.shape[1], k_cache.shape[2]
    g = hq // hkv
    out = torch.empty_like(q)
    qk_scale = 1.0 / math.sqrt(d) * 1.4426950408889634
    bg = max(16, triton.next_power_of_2(g))
    _decode[(b, hkv)](
        q,
        k_cache,
        v_cache,
        cache_lens,
        out,
        hkv,
        g,
        smax,
        qk_scale,
        D=d,
        BG=bg,
        BN=64,
        WIDEN=WIDEN,
        num_warps=4,
        num_stages=2,
    )
    return out
