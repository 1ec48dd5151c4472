"""Rotary position embedding (NeoX layout, rotating the whole head) applied to q and k, bf16.

q (T, HQ, D), k (T, HKV, D); positions (T,) int64; cos_sin_cache (P, D) float32 whose row p is
[cos(p * f_0..f_{D/2-1}) | sin(p * f_0..f_{D/2-1})], f_i = base^(-2i/D) / scale (base and scale vary per input
set). With x = [x1 | x2] split at D/2: out = [x1 * cos - x2 * sin | x2 * cos + x1 * sin]. Returns new tensors
(q_out, k_out).
"""

import functools

import torch

BASES = (1.0e4, 1.0e6)
"""The range the table's rotary base is drawn from, log-uniform: 10^4 (Llama-2, Mistral) to 10^6 (Qwen2), with
Llama-3's 5 * 10^5 between."""
SCALES = (1.0, 8.0)
"""The range of the linear position-interpolation factor the table's positions are divided by, log-uniform: none
up to an 8x context extension (Llama-3.1's factor)."""


def make_inputs(dims: dict, seed: int, device: str):
    """T tokens from SEQS packed sequences, each at a random offset in the context. The table's base and position
    scaling are drawn from the seed too, as models differ in both: a kernel must read the table, not rebuild it."""
    t, seqs, hq, hkv, d, p = dims["T"], min(dims["SEQS"], dims["T"]), dims["HQ"], dims["HKV"], dims["D"], dims["P"]
    g = torch.Generator(device=device).manual_seed(seed)
    with torch.device(device):  # generate where the kernel runs: large inputs in milliseconds
        q = torch.randn(t, hq, d, generator=g) * 2.0
        k = torch.randn(t, hkv, d, generator=g) * 2.0
        lengths = torch.full((seqs,), t // seqs) + (torch.arange(seqs) < t % seqs)
        starts = torch.randint(0, p - (t // seqs + (1 if t % seqs else 0)) + 1, (seqs,), generator=g)
        # whole-tensor ops, not one per sequence (up to 1,024 of them): the eval makes inputs for every timed block
        firsts = torch.cumsum(lengths, 0) - lengths
        positions = torch.repeat_interleave(starts - firsts, lengths) + torch.arange(t)
        u_base, u_scale = torch.rand(2, generator=g, dtype=torch.float64).tolist()
        base = BASES[0] * (BASES[1] / BASES[0]) ** u_base
        scale = SCALES[0] * (SCALES[1] / SCALES[0]) ** u_scale
        inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d) / scale
        angles = torch.arange(p, dtype=torch.float64)[:, None] * inv_freq[None, :]
        cos_sin = torch.cat((angles.cos(), angles.sin()), dim=-1).float()
        return q.to(device, torch.bfloat16), k.to(device, torch.bfloat16), positions.to(device), cos_sin.to(device)


def reference(q, k, positions, cos_sin_cache):
    """float64 arithmetic on the float32 table entries."""
    cos, sin = cos_sin_cache[positions].double()[:, None, :].chunk(2, dim=-1)

    def rotate(x):
        x1, x2 = x.double().chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).float()

    return rotate(q), rotate(k)


def rope_fp32(q, k, positions, cos_sin_cache):
    """The module code (vLLM's native path): gather, rotate in float32, round once."""
    cos, sin = cos_sin_cache[positions][:, None, :].chunk(2, dim=-1)

    def rotate(x):
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)

    return rotate(q), rotate(k)


@functools.cache
def _compiled():
    """Pointwise kernels keep Inductor's first config: picked by a benchmark at the first run, it changed between
    processes and hosts on the H200 (docs/decisions/2026-12-02-pointwise-autotune-off.md)."""
    return torch.compile(rope_fp32, dynamic=False, options={"triton.autotune_pointwise": False})


def baseline_compiled(q, k, positions, cos_sin_cache):
    """torch.compile (Inductor) of the float32 module code."""
    return _compiled()(q, k, positions, cos_sin_cache)


def flops(dims: dict) -> float:
    """Two multiplies and an add per output element."""
    return 3.0 * dims["T"] * (dims["HQ"] + dims["HKV"]) * dims["D"]


def bytes_moved(dims: dict) -> float:
    """q and k read and written, the positions, and one float32 table row per token."""
    t, hq, hkv, d = dims["T"], dims["HQ"], dims["HKV"], dims["D"]
    return 2.0 * 2 * t * (hq + hkv) * d + 8 * t + 4 * t * d
