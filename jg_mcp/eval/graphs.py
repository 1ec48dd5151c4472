"""Timing under CUDA graphs, at shapes where the fastest callable takes a few microseconds per call
(`graph_below_ms`): there a per-call loop's launches and ring copies add microseconds to every call, where a CUDA
graph of calls on cold inputs repeated within 0.8% (eval/results/h200/probe_graph.json). Such a shape is first timed
per call like every other (every check of jg_mcp/eval/timing.py runs there), then each callable in its own process
captures one graph of `calls` calls, each on an input set of its own, as many as fill a replay of `graph_replay_ms`
at the fastest baseline's per-call time (`replay_calls`) and as memory holds. Candidate and baselines take turns (A
B, then B A) for `graph_min_rounds` rounds, or up to `graph_rounds` until every callable's times agree within
`graph_spread` (`enough`), each turn a lead of untimed replays (the callable's own steady state; as many for every
callable, sized by the slowest callable's per-call time), then a timed block of one replay, clocked by the harness
as every block is (jg_mcp/eval/clock.py); a time is the block's time, less the calibrated ordering, divided by its
calls.
The speedups, rates and floor check then use these times for every callable alike (`ShapeResult.timed_by`).

The candidate captures its own graph, so it can tell it is being captured and record other work than it runs
eagerly, and it can tell a lead from a timed block. What the harness believes is what it observes from outside:
- every timed replay reads input sets the harness renewed after the block's gate (jg_mcp/eval/input_sets.py), one
  set per call: no call's result could have been computed earlier, in the graph or out of it;
- when each candidate block ends it reads a sample of every call's ring slot (the worker copies call i's outputs
  into slot i after the replay, before `done`; poisoned before the block), judges one call of its choosing after,
  and reads the input sets back; after each round it compares every call's sample with the baselines' replay of the
  same inputs, and judges the sample of a call far from it against the reference;
- no seen-input check runs here: a candidate that keeps results gains nothing in these replays (every input is
  new), and keeping them shows in the shape's per-call seen-input blocks, which ran first in the same process (on an
  H100 a graph replay right after its inputs were renewed ran up to 1.7 times as long per call as one on the
  same inputs again, for a candidate and not for a baseline, or for both: too unsteady to judge by);
- the graph's time is held to the physical floor like any other.
A callable that cannot be captured (one that waits on the host, say) leaves the shape timed per call, for every
callable, with the reason in `graph_note`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from jg_mcp.eval.bench import walled
from jg_mcp.eval.clock import LEAST_MS
from jg_mcp.eval.input_sets import InputSets
from jg_mcp.eval.memory import free_bytes, graph_fit, nbytes
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import EvalReport
from jg_mcp.eval.report_timing import GraphTiming, Timing
from jg_mcp.eval.sizing import iqm
from jg_mcp.eval.timing_checks import check_inputs, sampled_check, spot_check
from jg_mcp.eval.turns import BASELINE, SIDES
from jg_mcp.eval.wire.buffers import SharedBinding
from jg_mcp.eval.wire.messages import Graph, Release
from jg_mcp.goals import SEED_BITS

if TYPE_CHECKING:
    from jg_mcp.eval.bench import Bench
    from jg_mcp.eval.clock import Clocked
    from jg_mcp.eval.timing import TimingPhase
    from jg_mcp.eval.turns import Ran

MOST_CALLS = 1024
"""The most calls in one graph (`replay_calls`)."""
LEAST_CALLS = 8
"""A graph of fewer calls than this (all memory holds) is not worth timing: the shape stays timed per call."""
COPY_TIMINGS = 3
"""Timings of the harness's own copy of a replay's outputs (`GraphTimer.copy_ms`); their median counts."""


def replay_calls(least: int, per_call_ms: float, replay_ms: float, fit: int) -> int:
    """Calls in one graph: enough that a replay lasts `replay_ms` at `per_call_ms` (the fastest baseline's per-call
    time: no candidate's time sizes it), from `least`, and at most MOST_CALLS and what memory holds (`fit`)."""
    wanted = max(least, math.ceil(replay_ms / max(1e-6, per_call_ms)))
    return min(wanted, MOST_CALLS, fit)


def enough(per_call: list[list[float]], least: int, spread: float) -> bool:
    """Whether the graph rounds may stop: every callable has `least` times or more, as many as each other and an even
    number (each order of the turns as often), and each one's times lie within `spread` of their median (0: never)."""
    counts = {len(ts) for ts in per_call}
    if spread <= 0 or len(counts) != 1 or (n := counts.pop()) < least or n % 2:
        return False
    return all((max(ts) - min(ts)) <= spread * statistics.median(ts) for ts in per_call)


def lead_replays(per_call_ms: list[float], calls: int, lead_ms: float, most: int) -> int:
    """Untimed replays before each timed block, the same for every callable: enough to fill `lead_ms` at the
    slowest callable's per-call time (a baseline's at least, so no candidate's reported time can stretch it), at
    least one and at most `most`."""
    return max(1, min(most, math.ceil(lead_ms / max(1e-3, calls * max(per_call_ms)))))


@dataclass
class Replays:
    """One callable's timed graph blocks, as the harness saw them."""

    per_call: list[float] = field(default_factory=list)
    """Per timed block, the harness's time of its replay divided by its calls."""
    block: list[float] = field(default_factory=list)
    """Per timed block, the harness's time of the whole block."""

    def timing(self, calls: int) -> GraphTiming:
        """The callable's graph time."""
        ts = self.per_call
        return GraphTiming(
            median_ms=statistics.median(ts),
            iqm_ms=iqm(ts),
            q10_ms=min(ts) if len(ts) < 10 else statistics.quantiles(ts, n=10)[0],
            q90_ms=max(ts) if len(ts) < 10 else statistics.quantiles(ts, n=10)[-1],
            replays=len(ts),
            calls=calls,
            sets=calls,
            block_ms=statistics.median(self.block),
        )


class GraphTimer:
    """One shape's graph timing (see the module's docstring)."""

    def __init__(self, t: TimingPhase, report: EvalReport, b: Bench, results: dict[str, Timing]):
        self.t, self.report, self.bench, self.results = t, report, b, results
        self.case, self.shape = b.case, b.shape
        self.p, self.ev = t.p, t.ev
        self.sides = {side: {n: SharedBinding(n, t.ev.device) for n in ("gin", "gring")} for side in SIDES}
        self.sets: list[int] = []
        self.ins: dict[str, InputSets] = {}
        self.copy_per_call = 0.0
        """The harness's time of copying one call's outputs after a replay (`copy_ms`)."""

    def wanted(self) -> bool:
        fastest = min(r.median_ms for r in self.results.values())
        return self.p.graph_below_ms > 0 and fastest < self.p.graph_below_ms

    def run(self) -> None:
        p, ev = self.p, self.ev
        like = self.bench.like  # the per-call timing's layouts: the shape's sets and outputs are the graph's
        fit = graph_fit(
            nbytes(self.bench.own.inputs[0]), nbytes(like), p.ring_bytes, free_bytes(ev.device), len(self.t.names)
        )
        baselines = [r.median_ms for n, r in self.results.items() if n != "candidate"]
        calls = replay_calls(p.graph_calls, min(baselines, default=math.inf), p.graph_replay_ms, fit)
        if calls < LEAST_CALLS:
            self.shape.graph_note = f"memory holds the input sets and ring slots of {calls} calls only"
            return
        self.sets = list(range(calls))
        with walled(self.shape, "graph_inputs"):
            made = self.t.new_inputs(self.bench, calls)
        self.shape.graph_seeds = [(self.shape.renewed_seeds[-1] + i) % 2**SEED_BITS for i in range(calls)]
        try:
            for key, side in self.sides.items():
                self.ins[key] = InputSets(ev.expected, side["gin"], made)
                side["gring"].add_ring(like, calls)
            del made
            for key, proc in (("candidate", self.t.cand), ("baseline", self.t.base)):
                for binding in self.sides[key].values():
                    proc.bind(binding)
            with walled(self.shape, "graph_capture"):
                note = self.capture()
                self.copy_per_call = 0.0 if note else self.copy_ms() / calls
            if note:
                self.shape.graph_note = note
            else:
                for name, replays in self.rounds().items():
                    self.results[name].graph = replays.timing(calls)
                self.shape.timed_by = "graph"
            for key, proc in (("candidate", self.t.cand), ("baseline", self.t.base)):
                proc.send(Release(names=list(self.sides[key])))
                proc.recv()
        finally:
            self.ins = {}
            for side in self.sides.values():
                for binding in side.values():
                    binding.free()

    def message(self, name: str, replays: int) -> Graph:
        """Every replay block has the one form (capture, lead, timed)."""
        return Graph(fn=name, inputs="gin", sets=self.sets, replays=replays, ring="gring")

    def capture(self) -> str | None:
        """Every callable captures its graph and replays it once; why not, where one could not."""
        for name in self.t.names:
            clocked = self.exchange(name, 1, watch=False)  # the capture's warm-up calls run before `go`
            done = clocked.done
            if done.error is not None and not any(h.reason == Reason.FORBIDDEN_CALL for h in done.hints):
                return f"{name} could not be captured in a CUDA graph: {done.error[-500:]}"
            ran = self.t.turns.ran(name, clocked, 0.0)
            if name == "candidate":
                for f in ran.hints:
                    self.report.add(f.model_copy(update={"shape": self.case.name}))
        return None

    def exchange(
        self, name: str, replays: int, before_go: Callable[[], None] | None = None, watch: bool = True
    ) -> Clocked:
        ring = self.sides["candidate"]["gring"] if name == "candidate" else None
        calls = len(self.sets) * replays
        return self.t.turns.exchange(name, self.message(name, replays), calls, ring, before_go, watch)

    def block(self, name: str, replays: int, before_go: Callable[[], None] | None = None) -> Ran:
        """A block of `replays` replays, its time per call that of the replays alone: the copy of every call's
        outputs into the ring after the last replay is taken off as the harness measured it (`copy_ms`; at
        fused_add_rmsnorm's decode shape about 1.2 ms of a 5 ms block)."""
        if name == "candidate":
            self.sides["candidate"]["gring"].poison()
        clocked = self.exchange(name, replays, before_go)
        calls = len(self.sets) * replays
        per_call = self.t.turns.cal.per_call(clocked.ms, calls, copies=0) - self.copy_per_call / replays
        return self.t.turns.ran(name, clocked, max(LEAST_MS, per_call))

    def judged(self, ran: Ran, checks: int) -> None:
        """After a candidate block: its hints, its input sets read back, `checks` of its calls judged."""
        own = self.ins["candidate"]
        check_inputs(self.report, self.case, self.shape, ran.hints, own.intact())
        for _ in range(checks):
            spot_check(
                self.t.pick,
                self.ev.tol,
                self.report,
                self.case,
                self.shape,
                self.sides["candidate"]["gring"],
                own,
                self.sets,
            )

    def rounds(self) -> dict[str, Replays]:
        p, t = self.p, self.t
        timed = {n: Replays() for n in t.names}
        lead = lead_replays([r.median_ms for r in self.results.values()], len(self.sets), p.lead_ms, p.max_lead)
        for turn in range(p.graph_rounds):
            with walled(self.shape, "graph_inputs"):
                made = t.new_inputs(self.bench, len(self.sets))
            samples = {}
            for name in t.names if turn % 2 == 0 else t.names[::-1]:
                side = "candidate" if name == "candidate" else "baseline"
                with walled(self.shape, "graph_leads"):
                    led = self.block(name, lead)
                    if name == "candidate":  # judged as often as a timed block
                        self.judged(led, 1 if t.pick.random() < p.spot_check_p else 0)
                with walled(self.shape, "graph_blocks"):
                    ran = self.block(name, 1, self.ins[side].renewal(self.sets, made))
                mine = timed[name]
                mine.per_call.append(ran.per_call_ms)
                mine.block.append(ran.ms)
                samples[name] = ran.sample
                if name == "candidate":
                    with walled(self.shape, "graph_judged"):
                        self.judged(ran, 1)
            with walled(self.shape, "graph_judged"):  # the baselines' ring holds their replay of the round's inputs
                base = self.sides["baseline"]["gring"]
                own = self.ins["candidate"]
                sampled_check(
                    self.ev.tol, self.report, self.bench, samples["candidate"], base, len(self.sets), self.sets, own
                )
            if enough([r.per_call for r in timed.values()], p.graph_min_rounds, p.graph_spread):
                break
        return timed

    def copy_ms(self) -> float:
        """What the copy of every call's outputs into the ring after a replay costs (the worker's `copy_all`: one
        foreach copy), measured by the harness on its own stream, from the baselines' ring into the candidate's
        after an L2 clear, the median of COPY_TIMINGS; on the CPU stand-in a per-call copy from the calibration."""
        if self.ev.device != "cuda":
            return self.t.turns.cal.copy_ms * len(self.sets)
        src = [t for group in self.sides["baseline"]["gring"].groups for t in group]
        dst = [t for group in self.sides["candidate"]["gring"].groups for t in group]
        scratch = self.t.turns.clocks[BASELINE].scratch  # what clears the L2 before every block
        times = []
        for _ in range(COPY_TIMINGS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if scratch is not None:
                scratch.zero_()
            start.record()
            torch._foreach_copy_(dst, src)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)


def time_under_graphs(t: TimingPhase, report: EvalReport, b: Bench, results: dict[str, Timing]) -> None:
    """Time the shape under CUDA graphs too, where it qualifies (`graph_below_ms`); adds `graph` to each result."""
    timer = GraphTimer(t, report, b, results)
    if timer.wanted():
        timer.run()
