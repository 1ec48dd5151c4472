"""Mean cross-entropy of next-token logits over a large vocabulary, with ignored labels.

logits (T, V) bfloat16, labels (T,) int64 where IGNORE_INDEX marks positions without a target.
loss = mean over labelled t of (logsumexp(logits[t]) - logits[t, labels[t]]), a float32 scalar.
"""

import functools

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


def make_inputs(dims: dict, seed: int, device: str):
    """Gaussian logits (std 2) where the label's logit is raised by U(0, 14), so per-token losses range
    from near 0 (confident) to ~log V (lost); about 20% of labels are ignored (prompt tokens, padding)."""
    t, v = dims["T"], dims["V"]
    g = torch.Generator(device=device).manual_seed(seed)
    with torch.device(device):  # generate where the kernel runs: large inputs in milliseconds
        logits = torch.randn(t, v, generator=g) * 2.0
        labels = torch.randint(0, v, (t,), generator=g)
        logits[torch.arange(t), labels] += torch.rand(t, generator=g) * 14.0
        ignored = torch.rand(t, generator=g) < 0.2
        ignored[0] = False
        labels[ignored] = IGNORE_INDEX
        return logits.to(device, torch.bfloat16), labels.to(device)


def make_edge_inputs(dims: dict, seed: int, device: str):
    """`make_inputs` with whole runs of rows ignored (a prompt, padding): rows 1 to 64, and about a third of the runs
    of 16 to 64 rows after them; the first row kept. A kernel that averages per tile of rows (up to 32 of them)
    divides zero by zero at a tile with no label."""
    logits, labels = make_inputs(dims, seed, device)
    g = torch.Generator(device="cpu").manual_seed(seed ^ 0x5EED)
    labels = labels.clone()
    t, start = labels.shape[0], 65
    labels[1:start] = IGNORE_INDEX
    while start < t:
        run = int(torch.randint(16, 65, (1,), generator=g))
        if torch.rand(1, generator=g).item() < 0.35:
            labels[start : start + run] = IGNORE_INDEX
        start += run
    return logits, labels


def reference(logits, labels):
    """float64: logsumexp written out, the label's logit subtracted, averaged over labelled rows."""
    x = logits.double()
    m = x.amax(dim=-1, keepdim=True)
    lse = (m + torch.log(torch.exp(x - m).sum(dim=-1, keepdim=True))).squeeze(-1)
    keep = labels != IGNORE_INDEX
    picked = x[keep, labels[keep]]
    return ((lse[keep] - picked).sum() / keep.sum()).float()


def cross_entropy_fp32(logits, labels):
    """The module code (Hugging Face causal-LM loss): upcast the logits, F.cross_entropy."""
    return F.cross_entropy(logits.float(), labels, ignore_index=IGNORE_INDEX)


@functools.cache
def _compiled():
    """Pointwise kernels keep Inductor's first config: picked by a benchmark at the first run, it changed between
    processes and hosts on the H200 (docs/decisions/2026-12-02-pointwise-autotune-off.md)."""
    return torch.compile(cross_entropy_fp32, dynamic=False, options={"triton.autotune_pointwise": False})


def baseline_compiled(logits, labels):
    """torch.compile (Inductor) of the upcast + F.cross_entropy module code."""
    return _compiled()(logits, labels)


def flops(dims: dict) -> float:
    """Max, subtract, exp, sum per logit."""
    return 4.0 * dims["T"] * dims["V"]


def bytes_moved(dims: dict) -> float:
    return 2.0 * dims["T"] * dims["V"] + 8 * dims["T"] + 4
