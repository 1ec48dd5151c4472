"""Scoring: speedups, achieved rates and roofline, and the timing findings (escape, floor, faster on seen inputs)."""

from __future__ import annotations

from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import EvalReport, Finding, GraphTiming, Timing, geomean
from jg_mcp.goals import LoadedGoal

ESCAPE_SHARE = 0.15
"""The default of TimingParams.escape_share (what it means is written there)."""
FRESH_SLACK = 1.3
"""A candidate slower on never-seen inputs than on the timed input sets by this factor beyond what the baselines
show, and by more time than twice the baselines' extra time on them (and FRESH_MIN_MS), is caching: its speed
came from having seen the inputs (a cold cache costs every callable about the same time, not the same factor)."""
FRESH_MIN_MS = 0.005
UNACCOUNTED_MIN_MS = 0.01
"""The least per-call time beyond the reported device times (over the baselines') that is an escape."""
GRAPH_FRESH_MIN_MS = 0.0005
"""FRESH_MIN_MS under a graph, whose fresh time is one replay of dozens of calls, not a single call."""
GRAPH_UNACCOUNTED_MIN_MS = 0.15
"""The least time per graph block beyond the replays' reported times (over the baselines') that is an escape."""
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


def escaped(
    candidate: Timing, baselines: dict[str, Timing], share: float = ESCAPE_SHARE, pad_ms: float = 0.0
) -> str | None:
    """Why the harness's clock contradicts the candidate's reported times, else None (see TimingParams.escape_share).
    The margin is a share of the candidate's median or of the baselines' own unaccounted time less the shape's pad:
    the pad follows the slowest host a callable reports, so a candidate could raise it at will, and a margin that
    grew with it would let reported times shrink by as much."""
    if candidate.unaccounted_ms is None:
        return None
    theirs = [b.unaccounted_ms for b in baselines.values() if b.unaccounted_ms is not None]
    excess = candidate.unaccounted_ms - max(theirs, default=0.0)
    own = max(0.0, max(theirs, default=0.0) - pad_ms)
    if excess <= max(UNACCOUNTED_MIN_MS, share * max(candidate.median_ms, own)):
        return None
    return (
        f"the harness's clock saw {candidate.unaccounted_ms:.4f} ms per call beyond the reported device time "
        f"{candidate.median_ms:.4f} ms (baselines {max(theirs, default=0.0):.4f} ms): work done off the books "
        "(forged times, work outside the timed region or on another stream)"
    )


def graph_escaped(candidate: GraphTiming, baselines: dict[str, GraphTiming], share: float = ESCAPE_SHARE) -> str | None:
    """Why the harness's clock contradicts the candidate's reported replay times, else None: per block, the time it
    saw beyond the replays may exceed the baselines' by at most `share` of the larger of the candidate's replays
    and the baselines' unaccounted time, and GRAPH_UNACCOUNTED_MIN_MS."""
    theirs = max((b.unaccounted_ms for b in baselines.values()), default=0.0)
    excess = candidate.unaccounted_ms - theirs
    if excess <= max(GRAPH_UNACCOUNTED_MIN_MS, share * max(candidate.block_ms, theirs)):
        return None
    return (
        f"under a CUDA graph the harness's clock saw {candidate.unaccounted_ms:.4f} ms per block beyond the "
        f"replays' reported {candidate.block_ms:.4f} ms (baselines {theirs:.4f} ms): work done off the books "
        "(outside the timed replays or on another stream)"
    )


def gained(
    mine: tuple[float, float],
    theirs: list[tuple[float, float]],
    what: str,
    least: float = FRESH_MIN_MS,
    slack: float = FRESH_SLACK,
) -> str | None:
    """Why a callable whose (timed, fresh) times are `mine` looks faster on inputs it has seen than on fresh ones,
    by more than `slack` times the baselines' factor (`theirs`) and by more than `least` per call, else None."""
    timed, fresh = mine
    if not fresh or timed <= 0:
        return None
    ratio = fresh / timed
    known = [(b, f) for b, f in theirs if f and b > 0]
    ratios = [f / b for b, f in known]
    extra = max([f - b for b, f in known], default=0.0)
    if ratio <= slack * max([1.0, *ratios]) or fresh - timed <= max(least, 2 * extra):
        return None
    return (
        f"median {timed:.4f} ms on the timed input sets but {fresh:.4f} ms on fresh inputs{what} ({ratio:.2f}x; "
        f"baselines {max(ratios, default=1.0):.2f}x): the speed comes from having seen the inputs"
    )


def seen_inputs_gain(candidate: Timing, baselines: dict[str, Timing], slack: float = FRESH_SLACK) -> str | None:
    """Why the candidate looks faster on inputs it has seen than on fresh ones (beyond the baselines), else None."""
    theirs = [(b.median_ms, b.fresh_median_ms or 0.0) for b in baselines.values()]
    return gained((candidate.median_ms, candidate.fresh_median_ms or 0.0), theirs, "", slack=slack)


def graph_findings(
    candidate: Timing, baselines: dict[str, Timing], share: float = ESCAPE_SHARE, slack: float = FRESH_SLACK
) -> list[tuple[Reason, str]]:
    """What the graph timing says of the candidate: an escape, or speed that needs seen inputs (none without it)."""
    mine, theirs = candidate.graph, {n: b.graph for n, b in baselines.items() if b.graph is not None}
    if mine is None:
        return []
    fresh = [(g.median_ms, g.fresh_ms) for g in theirs.values()]
    seen = gained((mine.median_ms, mine.fresh_ms), fresh, " under a graph", GRAPH_FRESH_MIN_MS, slack)
    found = [(Reason.TIMING_ESCAPE, graph_escaped(mine, theirs, share)), (Reason.CACHED_OUTPUT, seen)]
    return [(reason, detail) for reason, detail in found if detail]


def timed_ms(t: Timing, graph: bool) -> float:
    """The time a speedup uses: under the CUDA graph where the shape was timed so, else per call."""
    return t.graph.median_ms if graph and t.graph is not None else t.median_ms


def score(goal: LoadedGoal, report: EvalReport, escape_share: float = ESCAPE_SHARE, slack: float = FRESH_SLACK) -> None:
    """Fill in per-shape speedups and rates, the geometric mean, and timing findings, in place."""
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
        found: list[tuple[Reason, str | None]] = [
            (Reason.TIMING_ESCAPE, escaped(cand, shape.baselines, escape_share, shape.pad_ms)),
            (Reason.CACHED_OUTPUT, seen_inputs_gain(cand, shape.baselines, slack)),
        ]
        if graph:
            found += graph_findings(cand, shape.baselines, escape_share, slack)
        for reason, detail in found:
            if detail:
                report.add(Finding(reason=reason, detail=detail, shape=shape.name))
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
