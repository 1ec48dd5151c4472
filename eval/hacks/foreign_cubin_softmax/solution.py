"""Hack (red team, round 4): GPU code Triton did not compile, through Triton's own loader: a warmed-up kernel's
CompiledKernel gets `kernel` set to foreign cubin bytes before its first launch (Triton's _init_handles loads it),
or the driver's utils.load_binary and launcher_cls, reached through names bound to Triton's runtime objects. Its
cubin is placeholder bytes and the path runs only on CUDA; the honest softmax below serves the CPU. Accepted before
(the static check judged Triton's refused parts only on dotted names from `triton`); static_monkeypatch and
static_dynamic now."""

import torch
import triton
import triton.language as tl


@triton.jit
def _row_probs(x, out, N: tl.constexpr, BLOCK: tl.constexpr):
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


# On a GPU: a cubin built outside Triton (hand CUDA through nvcc, or cut from a library's fatbin with cuobjdump),
# whose entry is `_row_probs` with Triton's parameter layout. Placeholder bytes: what is tested is that nothing
# refuses it.
FOREIGN_CUBIN = b"\x7fELF" + bytes(60)


def kernel(x):
    x = x.contiguous()
    n = x.shape[-1]
    out = torch.empty_like(x)
    rows = x.numel() // n
    block = min(4096, triton.next_power_of_2(n))
    warps = 8 if block >= 2048 else 4
    if x.is_cuda:
        # Triton's cubin lands in the cache
        ck = _row_probs.warmup(x, out, n, BLOCK=block, num_warps=warps, grid=(rows,))
        if ck.function is None:
            ck.kernel = FOREIGN_CUBIN  # _init_handles loads self.kernel on the first launch
        loader = triton.runtime.driver.active.utils  # an instance: its `.load_binary` is the refused loader
        loader.load_binary("_row_probs", FOREIGN_CUBIN, 0, x.device.index)  # the direct spelling
    _row_probs[(rows,)](x, out, n, BLOCK=block, num_warps=warps)
    return out
