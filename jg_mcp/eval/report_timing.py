"""The eval report's timing part (jg_mcp/eval/report.py holds the rest): how each callable was timed at a shape
(`Timing`, under a CUDA graph `GraphTiming`), the clocks NVML saw, the shape's buffers sized to the GPU
(`MemoryPlan`), and the method with its parameters whole (`TimingMethod`), with the reader of older reports' flat
parameters."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError, model_validator

from jg_mcp.eval.options import TimingParams
from jg_mcp.models import ReportModel


class ClockSummary(ReportModel):
    """What NVML saw of the GPU while one shape was timed (sampled about every 10 ms by the harness)."""

    samples: int
    """Number of samples."""
    sm_mhz_median: float
    """Median SM clock."""
    sm_mhz_min: float
    """Lowest SM clock seen."""
    sm_mhz_max: float | None = None
    """The board's maximum SM clock."""
    power_w_median: float | None = None
    """Median board power."""
    power_limit_w: float | None = None
    """Enforced power limit."""
    slowdowns: dict[str, float] = {}
    """Per slowdown reason seen (sw_power_cap, hw_slowdown, sw_thermal, ...), the fraction of samples it was active."""


class GraphTiming(ReportModel):
    """Device time per call of one callable under a CUDA graph of `calls` calls rotating over `sets` input sets
    (jg_mcp/eval/graphs.py)."""

    median_ms: float
    """Median over the timed replays of a replay's time divided by its calls."""
    iqm_ms: float
    """Interquartile mean of the same."""
    q10_ms: float
    q90_ms: float
    replays: int
    """Timed replays."""
    calls: int
    """Calls in the graph."""
    sets: int
    """Input sets the calls rotate over."""
    unaccounted_ms: float | None = None
    """Version 11 and earlier: the harness's clock around a block beyond the replays' reported times."""
    block_ms: float
    """Median over timed blocks of the harness's time of the block."""
    fresh_ms: float | None = None
    """Versions 9-12: per call, one replay on input sets rewritten just before it."""
    seen_ms: float | None = None
    """Unused: every graph replay timed reads new inputs, and the seen-input check runs per call only."""


class Timing(ReportModel):
    """Device time of one callable at one shape."""

    median_ms: float
    """Median of the per-call times (from version 12 one per timed block: the harness's time of the block, less
    the calibrated ordering and copies, divided by its calls)."""
    iqm_ms: float | None = None
    """Interquartile mean (the mean of the middle half) of the per-call times; reported beside the median, which
    the speedups use (version 7)."""
    iqr_ms: float
    """Interquartile range of the per-call times."""
    q10_ms: float
    """10th percentile."""
    q90_ms: float
    """90th percentile."""
    reps: int
    """Timed calls."""
    blocks: int | None = None
    """Timed blocks (version 12)."""
    rel_se_median: float
    """Relative standard error of the median (the stopping rule's statistic)."""
    host_median_ms: float | None = None
    """Versions 3-11: the harness's wall clock per call around a block."""
    unaccounted_ms: float | None = None
    """Versions 3-11: the per-call wall time the harness saw beyond the device times the worker reported."""
    block: int = 1
    """Calls per block: this callable's back-to-back calls in each turn."""
    lead: int = 0
    """Calls of the lead block before each timed block (their times unused): they bring the GPU to this
    callable's steady state (the clock under its own power draw)."""
    enqueue_ms: float | None = None
    """Host time per call to queue a block's calls (the worker's report; it sizes the harness's gate)."""
    host_waits: bool = False
    """The call waits for the GPU inside itself (a host synchronisation: `.item()`, `.tolist()`, a synchronize): the
    GPU left the harness's gate before the worker said the block was queued, though the gate was long enough for
    the block's queueing by its last report. Its time then includes the host's response to the GPU and moves with
    the host (GPU only). A note, not a check."""
    fresh_median_ms: float | None = None
    """Versions 2-12: median time of single calls on inputs written just before each call (from version 13 every
    timed call's inputs are new)."""
    seen_median_ms: float | None = None
    """Median per-call time of blocks rerun on the inputs of its last timed block, which it had seen (version 13):
    the caching check's side (`TimingParams.seen`)."""
    do_bench_ms: float | None = None
    """triton.testing.do_bench median of the same call, rotating over the timed input sets, when cross-checked."""
    clocks: ClockSummary | None = None
    """What NVML saw while this callable's timed blocks ran (GPU only): on a power-capped GPU each callable runs at
    the clock its own power draw allows, and its time goes with that clock."""
    graph: GraphTiming | None = None
    """Its time under a CUDA graph, where the shape was timed so (`ShapeResult.timed_by`)."""


class MemoryPlan(ReportModel):
    """How a timed shape's buffers were sized to the GPU's free memory (jg_mcp/eval/memory.py)."""

    free_bytes: int | None
    """Free GPU memory measured before the shape's buffers were made, the harness's own cache emptied first (None
    on the CPU, where the timing parameters decide alone)."""
    budget_bytes: int | None
    """The share of it all the shape's buffers may take, in the harness and both timing processes."""
    need_bytes: int
    """What the chosen counts take by the model of `memory.timed_need`."""
    input_sets: int
    """Input sets the timed calls rotate over (the timing parameters' `input_sets`, or fewer where memory is short)."""
    ring_slots: int
    """Output ring slots per timing process: the most calls in one block (`max_block` and `ring_bytes`, or fewer)."""
    fits: bool
    """Whether `need_bytes` is within `budget_bytes` (always on the CPU)."""


class TimingMethod(ReportModel):
    """How times were taken, stored with the result."""

    skipped: str | None = None
    """Why timing was skipped, if it was."""
    description: str = (
        "the harness's own clock around blocks of back-to-back calls, candidate and baselines taking turns (A B, then"
        " B A, ...), each after a lead block of the same calls where lead_ms asks for one, every timed call on new "
        "inputs the harness wrote after the block's gate, the L2 cleared; outputs read when each block ends and "
        "judged at calls the harness picks; blocks rerun on seen inputs to find kept results; at shapes of a few "
        "microseconds per call, under CUDA graphs too"
    )
    """The method in words."""
    params: TimingParams | None = None
    """The timing parameters the eval ran with, whole (jg_mcp/eval/options.py); None where timing was skipped."""

    @model_validator(mode="before")
    @classmethod
    def _flat_parameters(cls, data: Any) -> Any:
        """Reports of versions 2-11 listed the parameters flat, some under other names: read them into `params`
        (what no longer exists, the flush size and `sync_ms`, is dropped, and a parameter such a report did not
        record reads as its default; zeros of a skipped timing give None)."""
        if not isinstance(data, dict) or not FLAT_PARAMETERS.keys() & data.keys() - {"params"}:
            return data
        data = dict(data)
        flat = {FLAT_PARAMETERS[k]: data.pop(k) for k in list(data) if k in FLAT_PARAMETERS}
        kept = {k: v for k, v in flat.items() if k}
        try:
            data.setdefault("params", TimingParams(**kept) if any(kept.values()) else None)
        except ValidationError:
            data.setdefault("params", None)
        return data


FLAT_PARAMETERS = {
    "input_sets": "input_sets",
    "warmup_calls": "warmup",
    "min_reps": "min_reps",
    "max_reps": "max_reps",
    "target_rel_se": "target_rel_se",
    "budget_s": "budget_s",
    "cold_bytes": "cold_bytes",
    "block_ms": "block_ms",
    "lead_ms": "lead_ms",
    "max_block": "max_block",
    "min_rounds": "min_rounds",
    "fresh_sets": "",
    "spot_checks": "spot_checks",
    "graph_below_ms": "graph_below_ms",
    "graph_bytes": "",
    "graph_calls": "graph_calls",
    "graph_replay_ms": "graph_replay_ms",
    "graph_replays": "",
    "graph_rounds": "graph_rounds",
    "l2_flush_bytes": "",
    "sync_ms": "",
}
"""TimingMethod's flat fields of report versions 2-11, by the TimingParams field each became ("": none)."""
