"""Decode attention: one new query token per sequence against a padded KV cache, bf16, GQA.

q (B, HKV*G, D); k_cache and v_cache (B, HKV, SMAX, D); cache_lens (B,) int32 in 1..SMAX.
Sequence b attends to its first cache_lens[b] positions; query head h uses kv head h // G.
"""

import math

import torch
import torch.nn.functional as F


def make_inputs(dims: dict, seed: int, device: str):
    """Gaussian q and cache; lengths spread evenly over [SMAX/8, SMAX] in a random order.

    Cache slots past a sequence's length hold unrelated data, as a reused cache does.
    """
    b, hkv, g, smax, d = dims["B"], dims["HKV"], dims["G"], dims["SMAX"], dims["D"]
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.device(device):  # generate where the kernel runs: large inputs in milliseconds
        q = torch.randn(b, hkv * g, d, generator=gen) * 2.0
        k = torch.randn(b, hkv, smax, d, generator=gen)
        v = torch.randn(b, hkv, smax, d, generator=gen)
        lens = torch.linspace(max(1, smax // 8), smax, b).round().to(torch.int32)
        lens = lens[torch.randperm(b, generator=gen)]
        return q.to(device, torch.bfloat16), k.to(device, torch.bfloat16), v.to(device, torch.bfloat16), lens.to(device)


def make_edge_inputs(dims: dict, seed: int, device: str):
    """`make_inputs` with every length drawn from [1, SMAX] and one sequence of length 1: a kernel that takes some
    prefix of the cache as always valid reads slots past a sequence's end."""
    q, k, v, lens = make_inputs(dims, seed, device)
    g = torch.Generator(device="cpu").manual_seed(seed ^ 0x5EED)
    short = torch.randint(1, dims["SMAX"] + 1, (lens.shape[0],), generator=g, dtype=torch.int32)
    short[torch.randint(0, lens.shape[0], (1,), generator=g)] = 1
    return q, k, v, short.to(lens.device)


def reference(q, k_cache, v_cache, cache_lens):
    """float32, one sequence at a time, over exactly its valid cache prefix."""
    b, hq, d = q.shape
    hkv = k_cache.shape[1]
    group = hq // hkv
    out = torch.empty(b, hq, d, dtype=torch.float32, device=q.device)
    for i, n in enumerate(cache_lens.tolist()):
        qi = q[i].float().view(hkv, group, d)
        scores = qi @ k_cache[i, :, :n].float().transpose(1, 2) / math.sqrt(d)
        out[i] = (torch.softmax(scores, dim=-1) @ v_cache[i, :, :n].float()).reshape(hq, d)
    return out


def baseline_sdpa(q, k_cache, v_cache, cache_lens):
    """F.scaled_dot_product_attention with a length mask; the G query heads that share a kv head
    are passed as G query rows, so no kv head is copied."""
    b, hq, d = q.shape
    hkv, smax = k_cache.shape[1], k_cache.shape[2]
    valid = torch.arange(smax, device=q.device)[None, :] < cache_lens[:, None]
    out = F.scaled_dot_product_attention(
        q.view(b, hkv, hq // hkv, d), k_cache, v_cache, attn_mask=valid[:, None, None, :]
    )
    return out.reshape(b, hq, d)


def mean_len(dims: dict) -> float:
    """Average cache length that make_inputs produces: the midpoint of [SMAX/8, SMAX]."""
    return (max(1, dims["SMAX"] // 8) + dims["SMAX"]) / 2


def flops(dims: dict) -> float:
    return 4.0 * dims["B"] * dims["HKV"] * dims["G"] * dims["D"] * mean_len(dims)


def bytes_moved(dims: dict) -> float:
    """The valid part of the K and V caches, q and out."""
    b, hkv, g, d = dims["B"], dims["HKV"], dims["G"], dims["D"]
    return 2.0 * (2 * b * hkv * d * mean_len(dims) + 2 * b * hkv * g * d) + 4 * b
