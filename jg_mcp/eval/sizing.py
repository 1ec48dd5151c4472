"""How a timed shape's calls are grouped and their times read: the pad that hides launches, the calls per lead
and per timed block, the median, the interquartile mean and the median's standard error, and whether a callable's
host waits for the GPU. Plain arithmetic on measured numbers; the protocol that measures them is
jg_mcp/eval/timing.py."""

from __future__ import annotations

import math
import statistics

PAD_SHARE = 0.5
"""A shape is launch-bound when a callable's host time to queue one call exceeds this share of the GPU's time for
flush and call: the host could fall behind the GPU, and the launch would show in the call's time."""
PAD_FACTOR = 1.5
"""The pad is this multiple of the largest host time per call, so the GPU stays behind the host."""
PAD_MAX_MS = 0.5
"""The longest pad."""
MAX_LEAD_CALLS = 1024
"""The most calls in one lead block."""


def pad_for(queue_ms: dict[str, float], device_ms: dict[str, float], flush_ms: float) -> float:
    """The shape's pad: 0 unless some callable's host time per call (`queue_ms`, from a block as long as a timed
    block, in the callable's steady state) is over PAD_SHARE of the GPU's time for flush and call, else PAD_FACTOR
    times the largest host time per call, at most PAD_MAX_MS."""
    if not any(q > PAD_SHARE * (flush_ms + device_ms[n]) for n, q in queue_ms.items()):
        return 0.0
    return round(min(PAD_MAX_MS, PAD_FACTOR * max(queue_ms.values())), 4)


def flush_time_ms(flush_bytes: int) -> float:
    """The GPU's time to zero a flush buffer of `flush_bytes` (the median of five), measured in this process."""
    import torch

    if flush_bytes == 0:
        return 0.0
    buf = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        buf.zero_()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def waits_for_gpu(enqueue_ms: float, median_ms: float, flush_ms: float, pad_ms: float) -> bool:
    """Whether a callable's host waited for the GPU inside its calls: its host time per call is over the GPU's time
    before each call starts (flush and pad) plus half the call's own. A host that only queues work stays under it
    (the pad is sized so, and a shape without one has every host well ahead of the GPU); one that synchronises
    inside the call cannot get ahead of the GPU at all. On the H200, grouped_gemm's `.tolist()` callables queued
    1.0-3.6 ms per call against 0.6-1.9 ms of this bound, grouped_mm 0.07-0.13 ms."""
    return enqueue_ms > flush_ms + pad_ms + 0.5 * median_ms


def rotation(count: int, n_sets: int, first: int = 0) -> list[int]:
    """The input sets of `count` consecutive calls that rotate over `n_sets` sets call by call, the first call on
    set `first` (mod n_sets): how every block on the timed sets picks its inputs."""
    return [(first + i) % n_sets for i in range(count)]


def iqm(times_ms: list[float]) -> float:
    """The interquartile mean: the mean of the middle half of the sorted times (of all, under four). Unlike the
    median it moves smoothly with the share of calls in each of two modes a fraction of a microsecond apart."""
    ordered = sorted(times_ms)
    cut = len(ordered) // 4
    middle = ordered[cut : len(ordered) - cut]
    return statistics.fmean(middle)


def summarize(times_ms: list[float]) -> dict[str, float]:
    """Median, quartiles, interquartile mean and the relative standard error of the median (normal approximation,
    IQR-based sigma)."""
    q = statistics.quantiles(times_ms, n=20, method="inclusive")
    q25, q75 = statistics.quantiles(times_ms, n=4, method="inclusive")[0::2]
    med = statistics.median(times_ms)
    se = 1.2533 * (q75 - q25) / 1.349 / len(times_ms) ** 0.5
    return {
        "median_ms": med,
        "iqm_ms": iqm(times_ms),
        "iqr_ms": q75 - q25,
        "q10_ms": q[1],
        "q90_ms": q[17],
        "reps": len(times_ms),
        "rel_se_median": se / med if med > 0 else float("inf"),
    }


def block_sizes(estimates_ms: dict[str, float], block_ms: float, most: int) -> dict[str, int]:
    """Calls per block: enough back-to-back calls to fill `block_ms` (one call when block_ms is 0)."""
    if block_ms <= 0:
        return dict.fromkeys(estimates_ms, 1)
    return {n: max(1, min(most, math.ceil(block_ms / max(ms, 1e-4)))) for n, ms in estimates_ms.items()}


def lead_sizes(estimates_ms: dict[str, float], lead_ms: float) -> dict[str, int]:
    """Calls per lead block: enough to fill `lead_ms`, at most MAX_LEAD_CALLS (none when lead_ms is 0)."""
    return {
        n: min(MAX_LEAD_CALLS, math.ceil(lead_ms / max(ms, 1e-4))) if lead_ms > 0 else 0
        for n, ms in estimates_ms.items()
    }
