"""Timing: CUDA events per call, L2 flushed before each, candidate and baselines in alternating blocks, sets rotated.

`measure` runs in the candidate process (it must: the kernel runs there) but uses only the timer and torch
functions the guard captured before the candidate was imported. Calls are timed by device events around
them on the current stream; a probe also times a few calls by the host clock up to a full device
synchronize, and events that see far less than the host waited mean the work escaped the timed stream.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from jg_mcp.eval.policy import harness_call
from jg_mcp.eval.report import TimingMethod

L2_FLUSH_BYTES = 256 * 1024 * 1024
DEFAULTS = {
    "warmup": 3,
    "min_reps": 20,
    "max_reps": 2000,
    "min_rounds": 4,
    "block_ms": 25.0,
    "max_block": 64,
    "sync_ms": 50.0,
    "probe": 5,
    "target_rel_se": 0.01,
    "budget_s": 1.5,
    "input_sets": 3,
    "fresh": 5,
    "spot_checks": 2,
}
FRESH_SLACK = 1.3
"""A candidate slower on never-seen inputs than on the rotated sets by this factor beyond what the baselines
show (and by FRESH_MIN_MS) is caching: its speed came from having seen the inputs."""
FRESH_MIN_MS = 0.005


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


def method(params: dict[str, Any]) -> TimingMethod:
    """The timing parameters of a run, as the report states them."""
    p = DEFAULTS | params
    return TimingMethod(
        input_sets=p["input_sets"],
        warmup_calls=p["warmup"],
        min_reps=p["min_reps"],
        max_reps=p["max_reps"],
        target_rel_se=p["target_rel_se"],
        budget_s=p["budget_s"],
        l2_flush_bytes=L2_FLUSH_BYTES,
        block_ms=p["block_ms"],
        max_block=p["max_block"],
        min_rounds=p["min_rounds"],
        sync_ms=p["sync_ms"],
        fresh_sets=p["fresh"],
        spot_checks=p["spot_checks"],
    )


def block_sizes(estimates_ms: dict[str, float], block_ms: float, max_block: int) -> dict[str, int]:
    """Calls per block: enough back-to-back calls to fill `block_ms` (one call when block_ms is 0)."""
    if block_ms <= 0:
        return dict.fromkeys(estimates_ms, 1)
    return {n: max(1, min(max_block, math.ceil(block_ms / max(ms, 1e-4)))) for n, ms in estimates_ms.items()}


def measure(
    child: Any,
    callables: dict[str, Any],
    sets: list[tuple],
    params: dict[str, Any],
    fresh: Callable[[int], tuple] | None = None,
    kept: list[tuple[int, Any]] | None = None,
) -> dict[str, Any]:
    """Time every callable on the rotated input sets until the stopping rule holds; per callable, the summary.

    Callables take turns in blocks (A-block B-block, then B A, ...): each block is `block_ms` of back-to-back
    calls of one callable, so each runs in its own steady state (clocks under its own power draw, as
    do_bench sees it) while drift between blocks still cancels. Rounds are queued without host waits and
    synchronised once about `sync_ms` of work is queued; a separate probe then times a few calls each with a
    full synchronize and the host clock. With `fresh`, each callable is also timed once on each of `fresh`
    input sets made after timing, which no callable has seen before (`fresh_median_ms`). With `kept`, copies of
    the outputs of `spot_checks` (at most `min_reps`) timed candidate calls, picked uniformly at random over
    the whole run, are left in it with the index of their input set, so the harness can check that what was
    timed was also correct.
    """
    p = DEFAULTS | params
    torch = child.torch
    w = child.guard.watched
    sync, event = w["torch.cuda.synchronize"], w["torch.cuda.Event"]
    elapsed, record = w["torch.cuda.Event.elapsed_time"], w["torch.cuda.Event.record"]
    clock = time.perf_counter
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=child.device)
    names = list(callables)

    def call(name: str, inputs: tuple) -> Any:
        if name == "candidate":
            return callables[name](*inputs)
        return harness_call(child.recorder, callables[name], *inputs)

    clone, spots, pick = w["torch.Tensor.clone"], min(p["spot_checks"], p["min_reps"]), random.SystemRandom()

    def snapshot(out: Any) -> Any:
        """A copy queued right after the call: what the kernel returned, whatever happens to it later."""
        if isinstance(out, (tuple, list)):
            return [snapshot(o) for o in out]
        return clone(out) if type(out) is torch.Tensor else out

    def keep(n: int, i: int, out: Any) -> None:
        """Reservoir sampling over the timed candidate calls: `kept` stays a uniform pick of `spots` of them."""
        if kept is None:
            return
        if n < spots:
            kept.append((i, snapshot(out)))
        elif (j := pick.randrange(n + 1)) < spots:
            kept[j] = (i, snapshot(out))

    def queue(name: str, inputs: tuple, spot: tuple[int, int] | None = None) -> tuple[Any, Any]:
        flush.zero_()
        start, end = event(enable_timing=True), event(enable_timing=True)
        record(start)
        out = call(name, inputs)
        record(end)
        if spot is not None:
            keep(*spot, out)
        return start, end

    def probe(name: str, inputs: tuple) -> float:
        """Host time of flush + call + full synchronize, less the flush's device time."""
        f0, f1 = event(enable_timing=True), event(enable_timing=True)
        sync()
        h0 = clock()
        record(f0)
        flush.zero_()
        record(f1)
        call(name, inputs)
        sync()
        return (clock() - h0) * 1e3 - elapsed(f0, f1)

    estimates = {}
    for name in names[1:] + names[:1]:
        for s in sets:
            for _ in range(p["warmup"]):
                call(name, s)
        pairs = [queue(name, s) for s in sets]
        sync()
        estimates[name] = statistics.median(elapsed(a, b) for a, b in pairs)
        if name != "candidate":
            child.guard.absorb_threads()
    per_block = block_sizes(estimates, p["block_ms"], p["max_block"])
    round_ms = sum(per_block[n] * estimates[n] for n in names)
    most = max(1, p["max_reps"] // max(per_block.values()))
    rounds_per_sync = max(1, min(most, math.ceil(p["sync_ms"] / max(round_ms, 1e-4))))
    times: dict[str, list[float]] = {n: [] for n in names}
    queued = dict.fromkeys(names, 0)
    begin = clock()
    rounds = 0
    while True:
        pending = []
        for _ in range(rounds_per_sync):
            for name in names if rounds % 2 == 0 else names[::-1]:
                for _ in range(per_block[name]):
                    i = queued[name] % len(sets)
                    spot = (queued[name], i) if name == "candidate" else None
                    pending.append((name, *queue(name, sets[i], spot)))
                    queued[name] += 1
            rounds += 1
        sync()
        for name, start, end in pending:
            times[name].append(elapsed(start, end))
        if rounds < p["min_rounds"] or min(len(t) for t in times.values()) < p["min_reps"]:
            continue
        worst = max(summarize(times[n])["rel_se_median"] for n in names)
        full = max(map(len, times.values())) >= p["max_reps"]
        if worst < p["target_rel_se"] or clock() - begin > p["budget_s"] or full:
            break
    results = {}
    for name in names:
        host = [probe(name, sets[i % len(sets)]) for i in range(p["probe"])]
        results[name] = summarize(times[name]) | {"host_median_ms": statistics.median(host), "block": per_block[name]}
    if fresh is not None and p["fresh"] > 0:
        unseen: dict[str, list[float]] = {n: [] for n in names}
        for i in range(p["fresh"]):
            inputs = fresh(i)
            for name in names if i % 2 == 0 else names[::-1]:
                sync()
                pair = queue(name, inputs)
                sync()
                unseen[name].append(elapsed(*pair))
            del inputs
        for name in names:
            results[name]["fresh_median_ms"] = statistics.median(unseen[name])
    if p.get("do_bench"):
        import triton.testing

        for name in names[1:]:
            fn = callables[name]
            bench = functools.partial(triton.testing.do_bench, lambda fn=fn: fn(*sets[0]), warmup=25, rep=100)
            ms = harness_call(child.recorder, functools.partial(bench, return_mode="median"))
            results[name]["do_bench_ms"] = ms
    return results


def floor_ms(flops: float, nbytes: float, peak_tflops: float, peak_tbps: float) -> float:
    """The physical floor: the larger of compute time at peak and transfer time at full bandwidth."""
    return max(flops / (peak_tflops * 1e12), nbytes / (peak_tbps * 1e12)) * 1e3


def escaped(event_ms: float, host_ms: float) -> bool:
    """True when the host waited much longer than the events saw: over half the time and at least 0.1 ms missing."""
    return host_ms - event_ms > max(event_ms, 0.1)


def seen_inputs_gain(candidate: Any, baselines: dict[str, Any]) -> str | None:
    """Why the candidate looks faster on inputs it has seen than on fresh ones (beyond the baselines), else None."""
    if not candidate.fresh_median_ms or candidate.median_ms <= 0:
        return None
    ratio = candidate.fresh_median_ms / candidate.median_ms
    theirs = [b.fresh_median_ms / b.median_ms for b in baselines.values() if b.fresh_median_ms and b.median_ms > 0]
    allowed = FRESH_SLACK * min(2.0, max([1.0, *theirs]))
    if ratio <= allowed or candidate.fresh_median_ms - candidate.median_ms <= FRESH_MIN_MS:
        return None
    return (
        f"median {candidate.median_ms:.4f} ms on the rotated input sets but {candidate.fresh_median_ms:.4f} ms on "
        f"fresh inputs ({ratio:.2f}x; baselines {max(theirs, default=1.0):.2f}x): the speed comes from having seen "
        "the inputs"
    )
