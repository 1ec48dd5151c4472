"""How a timed shape's calls are grouped and their times read: the input sets a lead rotates over, the calls per lead
and per timed block, the median, the interquartile mean and the median's standard error. Plain arithmetic on
measured numbers; the protocol that measures them is jg_mcp/eval/timing.py."""

from __future__ import annotations

import math
import statistics


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
    IQR-based sigma). A single time has a spread of 0 and an infinite standard error."""
    if len(times_ms) < 2:
        t = times_ms[0]
        return {
            "median_ms": t,
            "iqm_ms": t,
            "iqr_ms": 0.0,
            "q10_ms": t,
            "q90_ms": t,
            "reps": 1,
            "rel_se_median": math.inf,
        }  # noqa: E501
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


def lead_sizes(estimates_ms: dict[str, float], lead_ms: float, most: int) -> dict[str, int]:
    """Calls per lead block: enough to fill `lead_ms`, at most `most` (none when lead_ms is 0)."""
    return {n: min(most, math.ceil(lead_ms / max(ms, 1e-4))) if lead_ms > 0 else 0 for n, ms in estimates_ms.items()}
