"""Causal self-attention forward (prefill), bf16, grouped-query attention.

q (B, HKV*G, S, D), k and v (B, HKV, S, D); query head h attends with key/value head h // G.
out = softmax(q k^T / sqrt(D) + causal mask) v, shape (B, HKV*G, S, D), bfloat16.
"""

import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

QUERY_CHUNK = 1024


def make_inputs(dims: dict, seed: int, device: str):
    """Gaussian q, k, v; q is scaled by 2 so attention rows are peaked, as in trained models."""
    b, hkv, g, s, d = dims["B"], dims["HKV"], dims["G"], dims["S"], dims["D"]
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.device(device):  # generate where the kernel runs: large inputs in milliseconds
        q = torch.randn(b, hkv * g, s, d, generator=gen) * 2.0
        k = torch.randn(b, hkv, s, d, generator=gen)
        v = torch.randn(b, hkv, s, d, generator=gen)
        return tuple(t.to(device, torch.bfloat16) for t in (q, k, v))


def make_edge_inputs(dims: dict, seed: int, device: str):
    """`make_inputs` with q scaled by 12: scores reach past 100, where a kernel that drops the running max (or its
    rescaling of the running sum) overflows float32's exp."""
    q, k, v = make_inputs(dims, seed, device)
    return (q.float() * 12.0).to(torch.bfloat16), k, v


def reference(q, k, v):
    """float32, one (batch, kv head) at a time, queries in chunks that only see keys up to their end."""
    b, hq, s, d = q.shape
    group = hq // k.shape[1]
    out = torch.empty(b, hq, s, d, dtype=torch.float32, device=q.device)
    pos = torch.arange(s, device=q.device)
    for i in range(b):
        for h in range(k.shape[1]):
            qh = q[i, h * group : (h + 1) * group].float()
            kh, vh = k[i, h].float(), v[i, h].float()
            for start in range(0, s, QUERY_CHUNK):
                end = min(start + QUERY_CHUNK, s)
                scores = qh[:, start:end] @ kh[:end].t() / math.sqrt(d)
                future = pos[None, :end] > pos[start:end, None]
                probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
                out[i, h * group : (h + 1) * group, start:end] = probs @ vh[:end]
    return out


def baseline_sdpa(q, k, v):
    """F.scaled_dot_product_attention, causal, native GQA, with the backend the dispatcher picks."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def baseline_sdpa_flash(q, k, v):
    """The same call restricted to the FlashAttention-2 backend."""
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def baseline_sdpa_cudnn(q, k, v):
    """The same call restricted to the cuDNN attention backend."""
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def flops(dims: dict) -> float:
    """QK^T and PV over the causal half of the score matrix."""
    b, hq, s, d = dims["B"], dims["HKV"] * dims["G"], dims["S"], dims["D"]
    return 4.0 * b * hq * d * s * (s + 1) / 2


def bytes_moved(dims: dict) -> float:
    b, hkv, g, s, d = dims["B"], dims["HKV"], dims["G"], dims["S"], dims["D"]
    return 2.0 * b * s * d * (2 * hkv * g + 2 * hkv)
