"""Mean cross-entropy with ignore_index: one Triton program per row computes its loss with an online
logsumexp in float32; the labelled rows' losses are then averaged."""

import torch
import triton
import triton.language as tl

IGNORE_INDEX = -100


@triton.jit
def _row_loss(logits, labels, loss, V: tl.constexpr, IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = row.to(tl.int64) * V
    cols = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, V, BLOCK):
        x = tl.load(logits + base + start + cols, mask=start + cols < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        total = total * tl.exp(m - m_new) + tl.exp(x - m_new)
        total = tl.where(m_new == float("-inf"), 0.0, total)
        m = m_new
    row_max = tl.max(m, 0)
    lse = row_max + tl.log(tl.sum(total * tl.exp(m - row_max), 0))
    label = tl.load(labels + row)
    keep = label != IGNORE
    picked = tl.load(logits + base + label, mask=keep, other=0.0).to(tl.float32)
    tl.store(loss + row, tl.where(keep, lse - picked, 0.0))


def kernel(logits, labels):
    logits = logits.contiguous()
    t, v = logits.shape
    loss = torch.empty(t, dtype=torch.float32, device=logits.device)
    block = min(4096, triton.next_power_of_2(v))
    _row_loss[(t,)](
        logits, labels.contiguous(), loss, v, IGNORE=IGNORE_INDEX, BLOCK=block, num_warps=8 if block >= 2048 else 4
    )
    labelled = (labels != IGNORE_INDEX).sum().to(torch.float32)
    return loss.sum() / labelled
