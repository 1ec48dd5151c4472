"""What `jg-mcp eval` is asked to evaluate, and how: strict models, so a misspelt option is an error."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from jg_mcp.models import Strict

FRESH_SLACK = 1.3
"""A candidate slower on never-seen inputs than on the timed input sets by this factor beyond what the baselines
show, and by more time than twice the baselines' extra time on them (and FRESH_MIN_MS), is caching: its speed
came from having seen the inputs (a cold cache costs every callable about the same time, not the same factor)."""


class TimingParams(Strict):
    """How shapes are timed (jg_mcp.eval.timing); a misspelt override is an error."""

    warmup: int = Field(default=3, ge=0)
    """Untimed calls per input set and callable before timing."""
    min_reps: int = Field(default=20, ge=1)
    """Fewest timed calls per callable (over its timed blocks)."""
    max_reps: int = Field(default=2000, ge=1)
    """Most timed calls per callable (over its timed blocks)."""
    min_rounds: int = Field(default=4, ge=1)
    """Fewest rounds (each callable's block once) before the stopping rule is applied."""
    block_ms: float = Field(default=25.0, ge=0)
    """Device time of one block of back-to-back calls of one callable (0: one call per block)."""
    lead_ms: float = Field(default=60.0, ge=0)
    """Device time of the lead block before every timed block: the same calls, their times unused, so that each
    callable is timed in its own steady state (on a power-capped GPU the clock follows the running kernel's draw
    over tens of ms), not in the state the previous callable's block left."""
    max_block: int = Field(default=64, ge=1)
    """Most calls in one block."""
    target_rel_se: float = Field(default=0.01, gt=0)
    """Stop when every callable's relative standard error of the median (over its timed blocks' per-call times) is
    under this."""
    budget_s: float = Field(default=1.5, gt=0)
    """Or when this much wall time per shape is spent."""
    input_sets: int = Field(default=3, ge=1)
    """Fewest input sets the timed calls (and their leads) rotate over call by call (more where `cold_bytes`
    needs them)."""
    fresh: int = Field(default=5, ge=0)
    """Fresh-input calls per callable after timing, each on inputs the harness writes into the shared buffers once
    the block's gate has passed (no callable can see them earlier), timed alone: speed that needs seen inputs is
    caching."""
    spot_check_p: float = Field(default=0.25, ge=0, le=1)
    """Probability that a candidate block has one of its calls' outputs checked (at least `spot_checks` are)."""
    spot_checks: int = Field(default=2, ge=0)
    """Fewest spot-checked calls per shape."""
    ring_bytes: int = Field(default=8 << 30, ge=1)
    """Most bytes of output ring per worker: a block has at most as many calls as ring slots, so any call's
    output can be the one checked."""
    cold_bytes: int = Field(default=256 << 20, ge=0)
    """Bytes the timed input sets span together, at least (as many sets as that takes, up to sizing.MOST_SETS, as
    memory allows): each set has left the L2 before a call reads it again, as an L2 flush before every call would
    make it, with no flush for the candidate's process to skip."""
    graph_below_ms: float = Field(default=0.05, ge=0)
    """A shape whose fastest callable takes under this per call (per-call time, measured first) is timed under
    CUDA graphs too, and its speedups are the graphs' (jg_mcp/eval/graphs.py); 0: never. On the H200 (run 28) the
    per-call times of 20-50 us shapes repeated within 4.3%, their graphs' within 0.6% (run 29)."""
    graph_bytes: int = Field(default=256 << 20, ge=1)
    """Bytes a graph's calls move together before a set is read again (its calls rotate over the fewest input sets
    that do, by the goal's bytes per call), so every call reads inputs that left the L2."""
    graph_calls: int = Field(default=64, ge=1)
    """Fewest calls in one graph (a multiple of its input sets)."""
    graph_replay_ms: float = Field(default=4.0, ge=0)
    """A graph has as many calls as fill one replay this long at the fastest baseline's per-call time (measured
    first; at a launch-bound shape it is up to twice the graph's), at most graph.MOST_CALLS: the harness's clock
    around a block also sees its own work (the messages, the ring copies, the worker's checks), 1.7-3.3 ms per block
    on the H200, which moved by up to 0.8 ms from one process to another. In blocks of 1.1 ms of replays (rope's 8b
    decode shape at 100 calls) that was up to 70% of the block: the honest candidate's clock check failed the first
    timing in 9 of 29 evals over runs 27-56, and both timings in one (run 56). 0: `graph_calls` alone."""
    graph_replays: int = Field(default=3, ge=1, le=64)
    """Timed replays per graph block. Few: the outputs of a block's last replay are what the harness checks, and
    work done once per block outside the replays is a share of the block's time the harness's clock must see."""
    graph_rounds: int = Field(default=6, ge=2)
    """Rounds of graph blocks per shape (A B, then B A, ...)."""
    fresh_slack: float = Field(default=FRESH_SLACK, gt=1)
    """How many times slower on fresh inputs than on the timed sets the candidate may be, beyond the baselines'
    factor, before it is CACHED_OUTPUT (see FRESH_SLACK)."""


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
    """Correctness trials per shape, each with fresh inputs."""
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
