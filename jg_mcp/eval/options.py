"""What `jg-mcp eval` is asked to evaluate, and how: strict models, so a misspelt option is an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from jg_mcp.models import Strict

SEEN_SLACK = 1.3
"""A candidate faster on inputs it has seen than on the new inputs of its timed blocks by this factor beyond what
the baselines show, and by more time than twice the baselines' difference (and scoring.SEEN_MIN_MS), keeps results
between calls (a warm cache saves every callable about the same time, not the same factor)."""
LEGACY_PARAMETERS = frozenset({"fresh", "fresh_slack", "graph_bytes", "graph_replays"})
"""Timing parameters of report version 12 that no longer exist, dropped when such a report is read."""


class TimingParams(Strict):
    """How shapes are timed (jg_mcp.eval.timing); a misspelt override is an error."""

    warmup: int = Field(default=1, ge=0)
    """Untimed calls per input set and callable before timing. One: on an H100, with `graph_min_rounds` at two, the
    eval's speedups moved a median 0.3% from those at three and four (35 of 37 shapes within 3%; do_bench's own
    ratios moved 0.4% between its two processes), and gemm_fp8's eval took 8.7% longer than bd7ccdb's instead of 17.5%
    (docs/decisions/2026-12-07-eval-wall-time-against-bd7ccdb.md)."""
    min_reps: int = Field(default=20, ge=1)
    """Fewest timed calls per callable (over its timed blocks)."""
    max_reps: int = Field(default=2000, ge=1)
    """Most timed calls per callable (over its timed blocks)."""
    min_rounds: int = Field(default=4, ge=1)
    """Fewest rounds (each callable's block once) before the stopping rule is applied."""
    block_ms: float = Field(default=25.0, ge=0)
    """Device time of one block of back-to-back calls of one callable (0: one call per block)."""
    lead_ms: float = Field(default=0.0, ge=0)
    """Device time of a lead block before every timed block: the same calls, their times unused, so that each
    callable is timed in its own steady state rather than the one the previous callable's block left (0: none). On
    an H100 leads of 30 ms bought no agreement with do_bench and cost 2.4-4.3 s of a goal's eval
    (docs/decisions/2026-12-07-no-leads-and-8-ms-graph-replays.md); `--timing lead_ms=30` gives them back."""
    max_lead: int = Field(default=256, ge=1)
    """Most calls in one lead block: at a shape of a few microseconds per call the host's launches, not the
    device, set a lead's length, and such a shape is timed under graphs anyway (`graph_below_ms`)."""
    max_block: int = Field(default=64, ge=1)
    """Most calls in one block."""
    target_rel_se: float = Field(default=0.01, gt=0)
    """Stop when every callable's relative standard error of the median (over its timed blocks' per-call times) is
    under this."""
    budget_s: float = Field(default=1.5, gt=0)
    """Or when this much wall time per shape is spent."""
    input_sets: int = Field(default=3, ge=1)
    """Fewest input sets bound per timing process (as many as a block has calls, `max_block`, where memory allows:
    a block's calls each read a set of their own; the lead blocks rotate over them)."""
    seen: int = Field(default=3, ge=0)
    """Blocks per callable after its timed rounds that rerun its last timed block's calls on the inputs it has
    already seen (no renewal): a candidate faster there than on the new inputs of its timed blocks, beyond what the
    baselines show, keeps results between calls (CACHED_OUTPUT). Its speedups never rest on seen inputs."""
    spot_check_p: float = Field(default=0.25, ge=0, le=1)
    """Probability that a candidate block has one of its calls' outputs checked (at least `spot_checks` are)."""
    spot_checks: int = Field(default=2, ge=0)
    """Fewest spot-checked calls per shape."""
    ring_bytes: int = Field(default=8 << 30, ge=1)
    """Most bytes of output ring per worker: a block has at most as many calls as ring slots, so any call's
    output can be the one checked."""
    cold_bytes: int = Field(default=256 << 20, ge=0)
    """Bytes the harness writes on its own stream before every block (GPU), after the block's new inputs: the L2
    then holds none of a block's inputs, as do_bench's flush before every call leaves it, with no flush in the
    candidate's process for it to skip (0: none)."""
    graph_below_ms: float = Field(default=0.05, ge=0)
    """A shape whose fastest callable takes under this per call (per-call time, measured first) is timed under
    CUDA graphs too, and its speedups are the graphs' (jg_mcp/eval/graphs.py); 0: never. On the H200 the per-call
    times of 20-50 us shapes repeated within 4.3%, their graphs' within 0.6%
    (docs/decisions/2026-12-03-graph-timing.md)."""
    graph_calls: int = Field(default=64, ge=1)
    """Fewest calls in one graph, each on an input set of its own."""
    graph_replay_ms: float = Field(default=8.0, ge=0)
    """A graph has as many calls as fill one replay this long at the fastest baseline's per-call time (measured
    first; at a launch-bound shape it is up to twice the graph's), at most graphs.MOST_CALLS and as many as memory
    holds: each call reads an input set of its own, and a timed block is one replay on sets the harness renewed
    after its gate. The harness's clock sees, besides the replay, the block's ordering and the copy of the outputs
    after it: on an H100 a cost of 0.14-0.34 ms per block that the calibration's empty blocks do not show, which a
    replay of 8 ms keeps to a few percent (docs/decisions/2026-12-07-no-leads-and-8-ms-graph-replays.md). 0:
    `graph_calls` alone."""
    graph_rounds: int = Field(default=6, ge=2)
    """Most rounds of graph blocks per shape (A B, then B A, ...)."""
    graph_min_rounds: int = Field(default=2, ge=2)
    """Fewest rounds of graph blocks: after these, and after every second round from there, the rounds stop once
    every callable's graph times so far lie within `graph_spread` of their median (jg_mcp.eval.graphs.enough). Each
    round renews every call's input set: at gemm_fp8's decode shape 147 sets of 84 MB, 0.3 s of the harness's
    making. Two: on an H100 the graph-timed shapes agreed with do_bench within 3% at 4 of 6 shapes after two, at 3 of
    6 after four (see `warmup`)."""
    graph_spread: float = Field(default=0.02, ge=0)
    """The spread (largest less smallest, over the median) of every callable's graph times under which the rounds
    stop after `graph_min_rounds` (0: always `graph_rounds`). On an H100 five of the six graph-timed shapes spread
    0.2-1.0% over six rounds, fused_add_rmsnorm's decode shape 4-37%
    (docs/decisions/2026-12-07-do-bench-agreement-to-its-noise.md)."""
    seen_slack: float = Field(default=SEEN_SLACK, gt=1)
    """How many times faster on inputs it has seen than on new ones the candidate may be, beyond the baselines'
    factor, before it is CACHED_OUTPUT (see SEEN_SLACK)."""

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        """Read a report of version 12: its parameters that no longer exist are dropped (LEGACY_PARAMETERS)."""
        if isinstance(data, dict) and LEGACY_PARAMETERS & data.keys():
            return {k: v for k, v in data.items() if k not in LEGACY_PARAMETERS}
        return data

    @model_validator(mode="after")
    def _rounds(self) -> TimingParams:
        if self.graph_min_rounds > self.graph_rounds:
            raise ValueError(f"graph_min_rounds ({self.graph_min_rounds}) exceeds graph_rounds ({self.graph_rounds})")
        return self


class EvalOptions(Strict):
    """What to evaluate and how."""

    goal: Path
    """The goal's YAML file."""
    workspace: Path
    """The agent's workspace."""
    solution: str | None = None
    """Workspace-relative solution file (default: the goal's)."""
    shapes: Literal["timed", "smoke", "all"] = "all"
    """Which goal shapes to check; shapes drawn from the shape domain are always added."""
    device: Literal["cuda", "cpu"] | None = None
    """Where to run; default cuda when available."""
    only: list[str] = []
    """If given, only the goal shapes with these names (drawn domain shapes are still added)."""
    trials: int = Field(default=3, ge=1)
    """Correctness trials per shape, each with fresh inputs (at most `correctness.EXTREME_TRIALS` at an extreme shape
    and at a CPU top shape)."""
    domain_shapes: int = Field(default=2, ge=0)
    """Untimed shapes drawn from the goal's shape domain (with any, also one at the top of the domain)."""
    extremes: bool = True
    """On a GPU, also check the domain's extremes once (jg_mcp/eval/shapes.py `extremes`): its largest corner, or
    the largest scaled shape that fits half of the free GPU memory, and shapes large in several dimensions at once
    (correctness only)."""
    timeout_s: float = 300.0
    """Wall-clock limit for each answer from a worker process."""
    total_timeout_s: float = Field(default=1800.0, gt=0)
    """Wall-clock limit for the whole eval: a candidate slow on every call, each within `timeout_s`, would otherwise
    hold the eval for as long as its calls add up to. When it runs out, the process waited on is killed and the
    eval rejected (TIMEOUT)."""
    timing: TimingParams = TimingParams()
    """The timing parameters."""
    timing_on_cpu: bool = False
    """Run the timing phase on the CPU too, with host-clock stand-ins for CUDA events (for tests of the timing
    protocol: times of the Triton interpreter mean nothing)."""
    do_bench: bool = False
    """Also time each baseline with triton.testing.do_bench, as an independent cross-check."""
    policy: Literal["open", "triton"] = "open"
    """The source policy: `open` admits any language and several files (native code is built from the workspace's
    sources and judged by what it loads); `triton` is the Triton-only allow-list of one Python file."""
    isolation: Literal["auto", "bwrap", "bwrap-unfiltered", "none"] = "auto"
    """The candidate process's sandbox: bwrap with its seccomp filter (auto: none only where bubblewrap is not
    installed and the harness is not root; bwrap: required), bwrap without the filter, or off (none)."""
    expect_goal_sha256: str | None = None
    """The goal hash the agent was served (from its transcript); a different goal now is reported."""
