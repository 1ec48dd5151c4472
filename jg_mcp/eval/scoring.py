"""Scoring: speedups, achieved rates and roofline, and the timing findings (below the floor, faster on seen inputs).
Every time scored is the harness's own (jg_mcp/eval/clock.py)."""

from __future__ import annotations

from jg_mcp.eval.options import SEEN_SLACK, TimingParams
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import EvalReport, Finding, geomean
from jg_mcp.eval.report_timing import Timing
from jg_mcp.goals import LoadedGoal

SEEN_MIN_MS = 0.0005
"""The least per-call time a callable must save on seen inputs to be found keeping results: both of its times are
blocks' per-call times."""
DATASHEET_TBPS = {
    "GH200": 4.9,
    "H200": 4.8,
    "H100 NVL": 3.9,
    "H100 PCIe": 2.0,
    "H100": 3.35,
    "H20": 4.0,
    "B200": 8.0,
    "B100": 8.0,
    "A100-SXM4-80GB": 2.039,
    "A100": 1.555,
    "L40S": 0.864,
    "L4": 0.3,
}
"""HBM bandwidth by the vendors' datasheets, matched against the GPU's name (first match wins)."""


def bandwidth_of(goal: LoadedGoal, gpu: str | None) -> tuple[float, str]:
    """The bandwidth the floor uses and why: the GPU's datasheet figure where it is higher than the goal's (a goal
    written for another GPU must not make an honest kernel on this one look impossibly fast), else the goal's."""
    declared = goal.goal.hardware.peak_bandwidth_tbps
    sheet = next((tbps for name, tbps in DATASHEET_TBPS.items() if gpu and name in gpu), None)
    if sheet is not None and sheet > declared:
        return sheet, f"{sheet} TB/s (datasheet of {gpu}; the goal declares {declared} for {goal.goal.hardware.name})"
    return declared, f"{declared} TB/s (the goal's figure for {goal.goal.hardware.name})"


def floor_ms(flops: float, nbytes: float, peak_tflops: float, peak_tbps: float) -> float:
    """The physical floor: the larger of compute time at peak and transfer time at full bandwidth."""
    return max(flops / (peak_tflops * 1e12), nbytes / (peak_tbps * 1e12)) * 1e3


def gained(
    mine: tuple[float, float],
    theirs: list[tuple[float, float]],
    what: str,
    least: float = SEEN_MIN_MS,
    slack: float = SEEN_SLACK,
) -> str | None:
    """Why a callable whose (new-input, seen-input) times are `mine` is faster on inputs it has seen than on new
    ones, by more than `slack` times the baselines' factor (`theirs`) and by more than `least` per call, else None."""
    new, seen = mine
    if not seen or seen <= 0:
        return None
    ratio = new / seen
    known = [(n, s) for n, s in theirs if s and s > 0]
    ratios = [n / s for n, s in known]
    extra = max([n - s for n, s in known], default=0.0)
    if ratio <= slack * max([1.0, *ratios]) or new - seen <= max(least, 2 * extra):
        return None
    return (
        f"median {seen:.4f} ms on inputs it had seen but {new:.4f} ms on the new inputs of its timed blocks{what} "
        f"({ratio:.2f}x; baselines {max(ratios, default=1.0):.2f}x): it keeps results between calls"
    )


def seen_inputs_gain(candidate: Timing, baselines: dict[str, Timing], slack: float = SEEN_SLACK) -> str | None:
    """Why the candidate is faster on inputs it has seen than on new ones (beyond the baselines), else None."""
    theirs = [(b.median_ms, b.seen_median_ms or 0.0) for b in baselines.values()]
    return gained((candidate.median_ms, candidate.seen_median_ms or 0.0), theirs, "", slack=slack)


def timed_ms(t: Timing, graph: bool) -> float:
    """The time a speedup uses: under the CUDA graph where the shape was timed so, else per call."""
    return t.graph.median_ms if graph and t.graph is not None else t.median_ms


def score(goal: LoadedGoal, report: EvalReport, p: TimingParams) -> None:
    """Fill in per-shape speedups and rates, the geometric mean, and timing findings, in place, by the timing
    parameters the eval ran with (`p`)."""
    slack = p.seen_slack
    hw = goal.goal.hardware
    tbps, basis = bandwidth_of(goal, report.environment.gpu)
    best = []
    for shape in report.shapes:
        cand = shape.candidate
        if cand is None:
            continue
        flops, nbytes = goal.flops(shape.dims), goal.bytes(shape.dims)
        graph = shape.timed_by == "graph"
        ms = {name: timed_ms(t, graph) for name, t in shape.baselines.items()}
        mine = timed_ms(cand, graph)
        shape.floor_ms = floor_ms(flops, nbytes, hw.peak_tflops, tbps)
        report.floor_basis = f"{hw.peak_tflops} TFLOP/s (the goal's), {basis}"
        shape.tflops = flops / (mine * 1e-3) / 1e12
        shape.tbps = nbytes / (mine * 1e-3) / 1e12
        shape.roofline_pct = 100.0 * shape.floor_ms / mine
        shape.speedup = {name: t / mine for name, t in ms.items()}
        if shape.baselines:
            strongest = min(ms, key=lambda n: ms[n])
            report.strongest_baseline[shape.name] = strongest
            best.append(shape.speedup[strongest])
        seen = seen_inputs_gain(cand, shape.baselines, slack)
        if seen:
            report.add(Finding(reason=Reason.CACHED_OUTPUT, detail=seen, shape=shape.name))
        if mine < shape.floor_ms:
            report.add(
                Finding(
                    reason=Reason.BELOW_FLOOR,
                    detail=f"median {mine:.4f} ms is below the physical floor {shape.floor_ms:.4f} ms "
                    f"({flops:.3g} flop at {hw.peak_tflops} TFLOP/s, {nbytes:.3g} B at {tbps} TB/s)",
                    shape=shape.name,
                )
            )
    report.geomean_speedup = geomean(best)
