"""Scoring: speedups, achieved rates and roofline, and the timing findings (escape, floor, faster on seen inputs)."""

from __future__ import annotations

from jg_mcp.eval.report import EvalReport, Finding, Reason, geomean
from jg_mcp.eval.timing import escaped, floor_ms, seen_inputs_gain
from jg_mcp.goals import LoadedGoal


def score(goal: LoadedGoal, report: EvalReport) -> None:
    """Fill in per-shape speedups and rates, the geometric mean, and timing findings, in place."""
    hw = goal.goal.hardware
    best = []
    for shape in report.shapes:
        cand = shape.candidate
        if cand is None:
            continue
        flops, nbytes = goal.flops(shape.dims), goal.bytes(shape.dims)
        shape.floor_ms = floor_ms(flops, nbytes, hw.peak_tflops, hw.peak_bandwidth_tbps)
        shape.tflops = flops / (cand.median_ms * 1e-3) / 1e12
        shape.tbps = nbytes / (cand.median_ms * 1e-3) / 1e12
        shape.roofline_pct = 100.0 * shape.floor_ms / cand.median_ms
        shape.speedup = {name: t.median_ms / cand.median_ms for name, t in shape.baselines.items()}
        if shape.baselines:
            strongest = min(shape.baselines, key=lambda n: shape.baselines[n].median_ms)
            report.strongest_baseline[shape.name] = strongest
            best.append(shape.speedup[strongest])
        if escaped(cand.median_ms, cand.host_median_ms):
            report.add(
                Finding(
                    reason=Reason.TIMING_ESCAPE,
                    detail=f"events saw {cand.median_ms:.4f} ms but the host waited {cand.host_median_ms:.4f} ms "
                    "for call + synchronize: work ran outside the timed stream",
                    shape=shape.name,
                )
            )
        if detail := seen_inputs_gain(cand, shape.baselines):
            report.add(Finding(reason=Reason.CACHED_OUTPUT, detail=detail, shape=shape.name))
        if cand.median_ms < shape.floor_ms:
            report.add(
                Finding(
                    reason=Reason.BELOW_FLOOR,
                    detail=f"median {cand.median_ms:.4f} ms is below the physical floor {shape.floor_ms:.4f} ms "
                    f"({flops:.3g} flop at {hw.peak_tflops} TFLOP/s, {nbytes:.3g} B at {hw.peak_bandwidth_tbps} TB/s)",
                    shape=shape.name,
                )
            )
    report.geomean_speedup = geomean(best)
