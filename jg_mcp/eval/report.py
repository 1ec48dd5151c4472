"""The eval report: a versioned pydantic schema (its reason codes: jg_mcp/eval/reasons.py; its Markdown form:
jg_mcp/eval/report_md.py)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report_timing import ClockSummary, MemoryPlan, Timing, TimingMethod
from jg_mcp.models import ReportModel

REPORT_VERSION = 17
"""The report's format version: what each version changed is in CHANGELOG.md. Reports of earlier versions still
load (the new fields are optional; one without `policy` was judged by the Triton-only policy)."""


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
    """Why the shape was timed twice: what a timing finding would have said of the first timing. The times here are the
    second's, whose blocks on seen inputs each follow a lead block where `lead_ms` asks for one; a finding is
    reported only if it shows too."""
    wall_s: dict[str, float] = {}
    """Wall time this shape took, per part: `check` (its correctness trials; of it, `check_reference` made their
    inputs and reference outputs, `check_bind` shared the buffers with the candidate's process, `check_calls`
    waited for its calls), `warm_candidate` and
    `warm_baselines` (every callable's first call in the timing processes, compilation included, while the
    correctness phase runs; the baselines' reads as at least the candidate's), `time` (its timing; of it,
    `time_estimate` warmed every callable and estimated its time per call, `time_inputs` made the new inputs of the
    timed rounds, `time_lead` ran the lead blocks, `time_blocks` the timed blocks with the harness's renewal of their
    inputs and its L2 clear, `time_seen` the blocks on seen inputs and `time_graphs` the CUDA graphs, next to
    nothing where none were timed; version 14; of `time_graphs`, `graph_inputs` made the graphs' input sets,
    `graph_capture` captured every callable's graph, `graph_leads` ran the untimed replays with their judging,
    `graph_blocks` the timed replays with the renewal of their inputs, `graph_judged` read back and judged the
    candidate's timed replays; version 17)."""


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
