"""Timing: CUDA events per call, L2 flushed before each, candidate and baselines interleaved, input sets rotated.

`measure` runs in the candidate process (it must: the kernel runs there) but uses only the timer and torch
functions the guard captured before the candidate was imported. Each call is timed twice: by device events
around it on the current stream, and by the host clock from before the L2 flush to after a full device
synchronize; events that see far less than the host waited mean the work escaped the timed stream.
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Any

from jg_mcp.eval.policy import harness_call

L2_FLUSH_BYTES = 256 * 1024 * 1024
DEFAULTS = {"warmup": 3, "min_reps": 20, "max_reps": 400, "target_rel_se": 0.01, "budget_s": 1.5, "input_sets": 3}


def summarize(times_ms: list[float]) -> dict[str, float]:
    """Median, quartiles and the relative standard error of the median (normal approximation, IQR-based sigma)."""
    q = statistics.quantiles(times_ms, n=20, method="inclusive")
    q25, q75 = statistics.quantiles(times_ms, n=4, method="inclusive")[0::2]
    med = statistics.median(times_ms)
    sigma = (q75 - q25) / 1.349
    se = 1.2533 * sigma / len(times_ms) ** 0.5
    return {
        "median_ms": med,
        "iqr_ms": q75 - q25,
        "q10_ms": q[1],
        "q90_ms": q[17],
        "reps": len(times_ms),
        "rel_se_median": se / med if med > 0 else float("inf"),
    }


def measure(child: Any, callables: dict[str, Any], sets: list[tuple], params: dict[str, Any]) -> dict[str, Any]:
    """Time every callable on the rotated input sets until the stopping rule holds; per callable, the summary."""
    p = DEFAULTS | params
    torch = child.torch
    w = child.guard.watched
    sync, event = w["torch.cuda.synchronize"], w["torch.cuda.Event"]
    elapsed, record = w["torch.cuda.Event.elapsed_time"], w["torch.cuda.Event.record"]
    clock = time.perf_counter
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    names = list(callables)

    def one(name: str, inputs: tuple) -> tuple[float, float]:
        fn = callables[name]
        e0, e1, e2 = event(enable_timing=True), event(enable_timing=True), event(enable_timing=True)
        h0 = clock()
        record(e0)
        flush.zero_()
        record(e1)
        if name == "candidate":
            out = fn(*inputs)
        else:
            out = harness_call(child.recorder, fn, *inputs)
        record(e2)
        sync()
        host = (clock() - h0) * 1e3 - elapsed(e0, e1)
        del out
        return elapsed(e1, e2), host

    for name in names:
        for s in sets:
            for _ in range(p["warmup"]):
                one(name, s)
    times: dict[str, list[float]] = {n: [] for n in names}
    hosts: dict[str, list[float]] = {n: [] for n in names}
    start = clock()
    rounds = 0
    while rounds < p["max_reps"]:
        order = names if rounds % 2 == 0 else names[::-1]
        inputs = sets[rounds % len(sets)]
        for name in order:
            t, h = one(name, inputs)
            times[name].append(t)
            hosts[name].append(h)
        rounds += 1
        if rounds >= p["min_reps"] and rounds % 5 == 0:
            worst = max(summarize(times[n])["rel_se_median"] for n in names)
            if worst < p["target_rel_se"] or clock() - start > p["budget_s"]:
                break
    results = {}
    for name in names:
        results[name] = summarize(times[name]) | {"host_median_ms": statistics.median(hosts[name])}
    if p.get("do_bench"):
        import triton.testing

        for name in names[1:]:
            fn = callables[name]
            bench = functools.partial(triton.testing.do_bench, lambda fn=fn: fn(*sets[0]), warmup=25, rep=100)
            ms = harness_call(child.recorder, functools.partial(bench, return_mode="median"))
            results[name]["do_bench_ms"] = ms
    del flush
    return results


def floor_ms(flops: float, nbytes: float, peak_tflops: float, peak_tbps: float) -> float:
    """The physical floor: the larger of compute time at peak and transfer time at full bandwidth."""
    return max(flops / (peak_tflops * 1e12), nbytes / (peak_tbps * 1e12)) * 1e3


def escaped(event_ms: float, host_ms: float) -> bool:
    """True when the host waited much longer than the events saw: over half the time and at least 0.1 ms missing."""
    return host_ms - event_ms > max(event_ms, 0.1)
