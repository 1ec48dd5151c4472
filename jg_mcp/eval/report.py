"""The eval report: a versioned pydantic schema (its reason codes: jg_mcp/eval/reasons.py; its Markdown form:
jg_mcp/eval/report_md.py)."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from jg_mcp.eval.options import TimingParams
from jg_mcp.eval.reasons import Reason
from jg_mcp.models import Strict

REPORT_VERSION = 13
"""2: per-shape `clocks`, per-timing `block` and `fresh_median_ms`, the block/fresh/spot-check timing parameters.
3: `isolation`, `phases`, per-timing `unaccounted_ms`, `host_median_ms` measured by the harness's clock (optional).
4: per-shape `pad_ms` and `launch_bound`, per-timing `lead` and `enqueue_ms`, the `lead_ms` timing parameter.
5: per-shape `wall_s`, per-timing `host_waits`; each timed block runs on one input set and frees each call's output
before the next call (times of version 4 and earlier rotated the sets call by call).
6: calls rotate over the input sets call by call again, leads and do_bench cross-checks too (version 5 timed each
block on one set, which moved by up to 18% between repeats at 5-45 us shapes on the H200).
7: per-timing `iqm_ms`, and per-shape `wall_s` splits the correctness check into `check_reference`,
`check_bind` and `check_calls`.
8: `environment.gpu_uuid`, and the phase `spares_wait` (an eval waiting for the next eval's processes to finish their
imports before it times).
9: per-shape `timed_by`, `graph_note` and `graph_seeds`, per-timing `graph`: shapes whose fastest callable takes a few
microseconds per call are timed under CUDA graphs too, and their speedups are the graphs'.
10: the timing parameter `graph_replay_ms`: a graph has as many calls as fill a replay of that long at the fastest
baseline's per-call time (version 9's had `graph_calls`, 64-100 calls, 1-3 ms per block at rope's decode shapes).
11: `policy` (open: any language, the default; triton: the Triton-only allow-list) and `sources`, every file of the
solution with its sha256 (the open policy copies the workspace's source files, not only the solution file);
`isolation.stubbed`, the library files (cuBLAS for the GEMM goals) covered by failing stubs in the sandbox; shapes
of kind `extreme` with `chosen`, per-shape `check_peak_bytes`, `memory` and `timing_skipped`: buffers are sized to
the GPU's free memory, and the domain's largest corner is checked where it fits.
12: every time is the harness's own (jg_mcp/eval/clock.py): per-shape `clock`, `ordering_ms`, `copy_ms` and
`gate_busy_ms`, per-timing `blocks` (its statistics are over the timed blocks' per-call times); `timing.params`, the
timing parameters whole (the flat fields of earlier versions are read into it), with `cold_bytes`; no flush or pad
per call (`pad_ms` 0), and no `unaccounted_ms` or `host_median_ms`.
13: every timed block reads new inputs the harness writes after its gate (one set per call; a graph block is one
replay, each call on its own set), then clears the L2; per-shape `renewed_seeds`; per-timing `seen_median_ms` and
graph `seen_ms` (blocks on inputs already seen: the caching check) replace `fresh_median_ms` and `fresh_ms`; the
parameters `seen` and `seen_slack` replace `fresh` and `fresh_slack`, and `graph_bytes` and `graph_replays` are gone.
Reports of earlier versions still load (the new fields are optional; one without `policy` was judged by the
Triton-only policy)."""


class ReportModel(Strict):
    """A model of the report (jg_mcp.models.Strict's rules)."""

    model_config = ConfigDict(ser_json_inf_nan="constants")
    """NaN and inf (a worst element that is NaN) are written as JSON's NaN/Infinity constants, which Python and the
    report loader read back, rather than as null, which would not validate."""


class Finding(ReportModel):
    """One piece of evidence against the candidate."""

    reason: Reason
    """The reason code."""
    detail: str
    """What was seen, for a reviewer."""
    shape: str | None = None
    """The shape it was seen at, if any."""
    trial: int | None = None
    """The trial it was seen in, if any."""


class ErrorStats(ReportModel):
    """Error of one output against the reference at one shape (worst over trials)."""

    max_abs: float
    """Largest |out - ref|."""
    max_rel: float
    """Largest |out - ref| / |ref| over elements with |ref| > atol."""
    worst_index: list[int]
    """Index of the element with the largest error relative to its tolerance (NaN, inf or poison first)."""
    worst_value: float
    """The candidate's value there."""
    worst_reference: float
    """The reference's value there."""
    bad_elements: int
    """Elements outside the tolerance, in the failing trial (0 when correct)."""
    failing_trial: int | None = None
    """The first trial that failed, if any."""


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
    """Per call, replays on the sets of its last timed block, not renewed (version 13)."""


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


class ShapeResult(ReportModel):
    """Everything measured at one shape."""

    name: str
    """Shape label (from the goal, or `domain_N` for a drawn one)."""
    kind: Literal["timed", "smoke", "domain", "top", "extreme"]
    """Where the shape comes from (`top`: the top of the shape domain; `extreme`: the domain's largest corner, or
    shapes large in several dimensions at once, as large as the GPU's memory allows: see `chosen`)."""
    chosen: str | None = None
    """How an `extreme` shape was chosen: the memory and work it was held to, and how far it was scaled down."""
    check_peak_bytes: int | None = None
    """GPU memory the harness took to check this shape (GPU only): its allocator's peak beyond what it held before
    (inputs, references, judging) plus the buffers shared with the candidate's process."""
    memory: MemoryPlan | None = None
    """How the timing's buffers of this shape were sized to the GPU's free memory (timed shapes)."""
    timing_skipped: str | None = None
    """Why this timed shape was not timed: its buffers could not fit the GPU's free memory even at the fewest
    input sets and ring slots (the numbers say by how much). Its correctness was checked; it has no speedup."""
    dims: dict[str, int]
    """Dimension values."""
    trials: int
    """Correctness trials run (each with fresh secret-seeded inputs)."""
    correct: bool
    """Every trial within tolerance with no output or input finding."""
    errors: list[ErrorStats] = []
    """Per output, the worst error over trials."""
    candidate: Timing | None = None
    """The candidate's timing (GPU only)."""
    baselines: dict[str, Timing] = {}
    """Each baseline's timing, interleaved with the candidate's."""
    speedup: dict[str, float] = {}
    """Baseline median / candidate median, per baseline (under CUDA graphs where `timed_by` says so)."""
    timed_by: Literal["calls", "graph"] = "calls"
    """What the speedups, rates and floor check use: the per-call times (`calls`), or, at a shape whose fastest
    callable took under `graph_below_ms` per call, every callable's time under a CUDA graph (`graph`)."""
    graph_note: str | None = None
    """Why a shape that qualified for CUDA graphs was timed per call (a callable that could not be captured)."""
    graph_seeds: list[int] = []
    """The seeds of the graph's first input sets, one per call from version 13 (published as `input_seeds` are)."""
    floor_ms: float | None = None
    """Physical floor: max(flops / peak, bytes / bandwidth)."""
    tflops: float | None = None
    """Achieved TFLOP/s."""
    tbps: float | None = None
    """Achieved TB/s over the goal's minimum bytes."""
    roofline_pct: float | None = None
    """Candidate floor / candidate median, in percent."""
    clocks: ClockSummary | None = None
    """GPU clocks and power while this shape was timed (GPU only, where NVML answers)."""
    pad_ms: float = 0.0
    """Versions 4-11: GPU sleep between the L2 flush and each timed call (from version 12 the harness's gate hides
    launches: no pad)."""
    launch_bound: bool = False
    """Versions 4-11: some callable needed the pad."""
    clock: str | None = None
    """Which clock timed the shape's blocks (version 12: the harness's own, jg_mcp/eval/clock.py)."""
    ordering_ms: float | None = None
    """What the clock saw of an empty block on the baselines' process: subtracted once from every block."""
    gate_busy_ms: float | None = None
    """The longest time another CUDA context held the GPU during the gate before one of the baselines' blocks (GPU;
    a graph's capture block aside, whose warm-up calls run before `go`): over 0.05 ms for one block twice in a row
    ends timing (the candidate's work outlived its block)."""
    copy_ms: float | None = None
    """What the clock saw per call of a no-work callable on the baselines' process (the copy of one call's outputs
    into its ring slot): subtracted once per call from every per-call block."""
    input_seeds: list[int] = []
    """The seeds of the input sets first bound for timing (the goal's `make_inputs(dims, seed)`): drawn in secret
    for this eval and published once its candidate has ended, so an independent measurement can time the same
    inputs (where the inputs decide the work, other draws take other times)."""
    renewed_seeds: list[int] = []
    """Per round of timed blocks (per-call rounds, then graph rounds), the first seed of the inputs the harness wrote
    for it after each block's gate: call i of a block read `make_inputs(dims, seed + i)` (version 13)."""
    retimed: str | None = None
    """Why the shape was timed twice: what a timing finding would have said of the first timing. The times here
    are the second's, whose blocks on seen inputs each follow a lead block; a finding is reported only if it shows
    too."""
    wall_s: dict[str, float] = {}
    """Wall time this shape took, per part: `check` (its correctness trials; of it, `check_reference` made their
    inputs and reference outputs, `check_bind` shared the buffers with the candidate's process, `check_calls`
    waited for its calls), `warm_candidate` and
    `warm_baselines` (every callable's first call in the timing processes, compilation included, while the
    correctness phase runs; the baselines' reads as at least the candidate's), `time` (its timing)."""


class Environment(ReportModel):
    """Where the eval ran."""

    device: str
    """`cuda` or `cpu`."""
    gpu: str | None
    """GPU name, if any."""
    driver: str | None
    """NVIDIA driver version, if any."""
    gpu_uuid: str | None = None
    """The GPU's UUID, if any: which physical GPU, so that runs on different machines can be told apart."""
    torch: str
    """torch version."""
    triton: str
    """triton version."""
    python: str
    """Python version."""
    jg_mcp: str
    """jg-mcp version."""
    host: str
    """Host name."""
    interpreter: bool
    """True when Triton kernels ran in the Triton interpreter (no GPU)."""
    baseline_cache: str | None = None
    """The baselines' torch.compile and Triton cache (jg_mcp.eval.processes.compile_cache): every eval on this host with
    this torch, Triton and GPU measures the baselines compiled there first."""
    baseline_cache_problem: str | None = None
    """Why the shared cache was not used (the baselines were compiled anew in this eval), if it was not."""


class TimingMethod(ReportModel):
    """How times were taken, stored with the result."""

    skipped: str | None = None
    """Why timing was skipped, if it was."""
    description: str = (
        "the harness's own clock around blocks of back-to-back calls, candidate and baselines taking turns (A B, "
        "then B A, ...), each after a lead block of the same calls, every timed call on new inputs the harness wrote "
        "after the block's gate, the L2 cleared; outputs read when each block ends and judged at calls the harness "
        "picks; blocks rerun on seen inputs to find kept results; at shapes of a few microseconds per call, under CUDA "
        "graphs too"
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


class Isolation(ReportModel):
    """How the candidate process was isolated."""

    sandbox: Literal["bwrap", "none"]
    """`bwrap`: its own pid, net and ipc namespaces, a private root, /tmp and /dev/shm; `none`: a plain process."""
    missing: list[str] = []
    """Protections the candidate process did not have (empty under bwrap)."""
    detail: str = ""
    """Why bwrap was not used, when it was not."""
    stubbed: list[str] = []
    """Library files covered by failing stubs in the candidate's sandbox, because the goal forbids their kernels
    (version 11 on)."""


class SourceRecord(ReportModel):
    """One file of the solution as the eval copied it out of the workspace."""

    path: str
    """Workspace-relative path."""
    sha256: str
    """Hash of the bytes copied."""
    bytes: int
    """Size in bytes."""


class EvalReport(ReportModel):
    """The verdict on one solution for one goal."""

    version: int = REPORT_VERSION
    """Report schema version."""
    goal: str
    """Goal name."""
    goal_sha256: str
    """Hash of the goal's YAML and module."""
    solution_sha256: str
    """Hash of the solution file as copied out of the workspace."""
    solution_file: str
    """Where it was copied from."""
    policy: Literal["open", "triton"] = "triton"
    """Which source policy judged it (version 11 on): `open`, any language, or `triton`, the Triton-only
    allow-list."""
    sources: list[SourceRecord] = []
    """Every file of the solution the eval copied, the solution file first (version 11 on)."""
    accepted: bool
    """Correct at every shape and no finding."""
    reasons: list[Reason] = []
    """Distinct reason codes of the findings, in order of first appearance."""
    findings: list[Finding] = []
    """All evidence against the candidate."""
    shapes: list[ShapeResult] = []
    """Per-shape results."""
    geomean_speedup: float | None = None
    """Geometric mean over timed shapes of the speedup against the strongest baseline there."""
    strongest_baseline: dict[str, str] = {}
    """Per timed shape, the baseline with the lowest median."""
    seed: int
    """The secret seed drawn at eval time, published after the candidate ran."""
    timing: TimingMethod = Field(default_factory=TimingMethod)
    """How timing was done, or why it was skipped."""
    environment: Environment
    """Where it ran."""
    notes: list[str] = []
    """What the eval did not judge, and why (the body of a self-test under `if __name__ == "__main__":`): for the
    reader, never a reason."""
    candidate_output_tail: str = ""
    """Last lines the candidate process printed (stdout and stderr)."""
    wall_s: float = 0.0
    """Wall time of the whole eval."""
    phases: dict[str, float] = {}
    """Wall seconds per phase: setup (copy, static check, process start), correctness (of which `candidate_start`:
    until the candidate's process has imported the solution), timing, total; within timing
    `timing_prepare_wait` (waiting for the timing processes' start and first calls, which ran in `timing_prepare`
    alongside correctness) and `timing_seen` (the blocks on seen inputs; `timing_fresh` in version 12 and earlier)."""
    isolation: Isolation | None = None
    """How the candidate process was isolated (version 3 on)."""
    floor_basis: str | None = None
    """The peaks the physical floor was computed from, and where each comes from."""
    goal_changed: str | None = None
    """The goal hash the caller expected, when the goal read now differs from it (the goal changed)."""

    def add(self, finding: Finding) -> None:
        """Record a finding once (the same reason and detail seen again adds nothing)."""
        if any(f.reason == finding.reason and f.detail == finding.detail for f in self.findings):
            return
        self.findings.append(finding)
        if finding.reason not in self.reasons:
            self.reasons.append(finding.reason)


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None
