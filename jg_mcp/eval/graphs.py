"""Timing under CUDA graphs, at shapes where the fastest callable takes a few microseconds per call
(`graph_below_ms`): there a per-call loop's launches and ring copies add microseconds to every call, where a CUDA
graph of calls rotating over cold inputs repeated within 0.8% (eval/results/h200/probe_graph.json). Such a shape is
first timed per call like every other (every check of jg_mcp/eval/timing.py runs there), then each callable in its
own process captures one graph of `calls` calls rotating over `sets` input sets, the fewest whose calls move
`graph_bytes` together (a set has left the L2 before it is read again). There are as many calls as fill a replay of
`graph_replay_ms` at the fastest baseline's per-call time (`replay_calls`). Candidate and baselines take turns (A B,
then B A), each turn a lead of untimed replays (the callable's own steady state; as many for every callable, sized
by the slowest callable's per-call time), then a timed block of `graph_replays` replays, clocked by the harness as
every block is (jg_mcp/eval/clock.py); a time is the block's time, less the calibrated ordering, divided by its
calls. The speedups, rates and floor check then use these times for every callable alike (`ShapeResult.timed_by`).

The candidate captures its own graph, so it can tell it is being captured and record other work than it runs
eagerly. What the harness believes is what it observes from outside:
- when each candidate block ends it reads a sample of every call's ring slot (the worker copies call i's outputs
  into slot i after the last replay, before `done`; poisoned before the block), judges one call of its choosing
  after, and reads back the input sets;
- after the timed rounds it rewrites every input set with inputs none has seen (the candidate's, once its block's
  gate has passed) and times one replay of each callable: a candidate that is faster on the sets it has seen,
  beyond what the baselines show, is caching (CACHED_OUTPUT), and those outputs are judged too;
- the graph's time is held to the physical floor like any other.
A callable that cannot be captured (one that waits on the host, say) leaves the shape timed per call, for every
callable, with the reason in `graph_note`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from jg_mcp.eval.memory import free_bytes, graph_ring_bytes, nbytes
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import EvalReport, GraphTiming, Timing
from jg_mcp.eval.sizing import MAX_LEAD_CALLS, cold_sets, iqm, rotation
from jg_mcp.eval.timing_checks import check_inputs, spot_check
from jg_mcp.eval.wire.buffers import SharedBinding
from jg_mcp.eval.wire.messages import Graph, Release
from jg_mcp.goals import SEED_BITS

if TYPE_CHECKING:
    from jg_mcp.eval.clock import Clocked
    from jg_mcp.eval.shapes import Case
    from jg_mcp.eval.timing import Ran, TimingPhase

SIDES = ("candidate", "baseline")
"""Each process gets its own copy of the graph's input sets and ring, as in jg_mcp/eval/timing.py."""
MOST_SETS = 512
"""The most input sets one graph rotates over."""
MOST_CALLS = 2048
"""The most calls in one graph (`replay_calls`)."""
FRESH_CHECKS = 2
"""Calls of the candidate's fresh replay whose outputs are judged."""


def graph_sets(call_bytes: float, floor: int, most: int = MOST_SETS) -> int:
    """The fewest input sets (3 to `most`) whose calls move `floor` bytes together."""
    return cold_sets(call_bytes, floor, 3, most)


def graph_calls(n_sets: int, least: int) -> int:
    """Calls in one graph: the smallest multiple of `n_sets` from `least`, so every set is read equally often."""
    return n_sets * math.ceil(least / n_sets)


def replay_calls(n_sets: int, least: int, per_call_ms: float, replay_ms: float, fit: int) -> int:
    """Calls in one graph: enough that a replay lasts `replay_ms` at `per_call_ms` (the fastest baseline's per-call
    time: no candidate's reported time sizes it), from `least`, at most MOST_CALLS and as many as the ring `fit`s
    (never under `least`), a multiple of `n_sets`."""
    calls = graph_calls(n_sets, max(least, math.ceil(replay_ms / max(1e-6, per_call_ms))))
    most = min(fit, MOST_CALLS)
    if calls > most:
        calls = n_sets * (most // n_sets)
    return max(calls, graph_calls(n_sets, least))


def lead_replays(per_call_ms: list[float], calls: int, lead_ms: float) -> int:
    """Untimed replays before each timed block, the same for every callable: enough to fill `lead_ms` at the
    slowest callable's per-call time (a baseline's at least, so no candidate's reported time can stretch it), at
    least one and at most MAX_LEAD_CALLS."""
    return max(1, min(MAX_LEAD_CALLS, math.ceil(lead_ms / max(1e-3, calls * max(per_call_ms)))))


class References(Sequence[list[torch.Tensor]]):
    """The reference outputs of each input set, computed when first asked for."""

    def __init__(self, compute: Any, inputs: list[list[torch.Tensor]]):
        self.compute, self.inputs = compute, inputs
        self.done: dict[int, list[torch.Tensor]] = {}

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, i: Any) -> Any:
        if i not in self.done:
            self.done[i] = self.compute(self.inputs[i])
        return self.done[i]


@dataclass
class Replays:
    """One callable's timed graph blocks, as the harness saw them."""

    per_call: list[float] = field(default_factory=list)
    """Per timed block, the harness's time of its replays divided by their calls."""
    block: list[float] = field(default_factory=list)
    """Per timed block, the harness's time of the whole block."""

    def timing(self, calls: int, sets: int, fresh_ms: float, per_block: int) -> GraphTiming:
        """The callable's graph time, with its fresh replay's time per call."""
        ts = self.per_call
        return GraphTiming(
            median_ms=statistics.median(ts),
            iqm_ms=iqm(ts),
            q10_ms=min(ts) if len(ts) < 10 else statistics.quantiles(ts, n=10)[0],
            q90_ms=max(ts) if len(ts) < 10 else statistics.quantiles(ts, n=10)[-1],
            replays=len(ts) * per_block,
            calls=calls,
            sets=sets,
            block_ms=statistics.median(self.block),
            fresh_ms=fresh_ms,
        )


class GraphTimer:
    """One shape's graph timing (see the module's docstring)."""

    def __init__(self, t: TimingPhase, report: EvalReport, case: Case, results: dict[str, Timing]):
        self.t, self.report, self.case, self.results = t, report, case, results
        self.p, self.ev = t.p, t.ev
        self.shape = next(s for s in report.shapes if s.name == case.name)
        self.sides = {side: {n: SharedBinding(n, t.ev.device) for n in ("gin", "gring")} for side in SIDES}

    def wanted(self) -> bool:
        fastest = min(r.median_ms for r in self.results.values())
        return self.p.graph_below_ms > 0 and fastest < self.p.graph_below_ms

    def run(self) -> None:
        p, ev, case = self.p, self.ev, self.case
        n_sets = graph_sets(ev.goal.bytes(case.dims), p.graph_bytes)
        seeds = [ev.rng.randrange(2**SEED_BITS) for _ in range(n_sets)]
        inputs = [ev.make_inputs(case.dims, seed) for seed in seeds]
        like = ev.output_like(ev.expected(inputs[0]))
        call_bytes = sum(t.numel() * t.element_size() for t in like)
        baselines = [r.median_ms for n, r in self.results.items() if n != "candidate"]
        ring = graph_ring_bytes(p.ring_bytes, sum(nbytes(group) for group in inputs), free_bytes(ev.device))
        fit = ring // max(1, call_bytes)
        calls = replay_calls(n_sets, p.graph_calls, min(baselines, default=math.inf), p.graph_replay_ms, fit)
        if calls * call_bytes > ring:
            self.shape.graph_note = f"its {calls} calls' outputs need {calls * call_bytes} B of ring, over {ring} B"
            return
        self.sets = rotation(calls, n_sets)
        try:
            for side in self.sides.values():
                for group in inputs:
                    side["gin"].add_copy(group)
                side["gring"].add_ring(like, len(self.sets))
            for key, proc in (("candidate", self.t.cand), ("baseline", self.t.base)):
                for binding in self.sides[key].values():
                    proc.bind(binding)
            if note := self.capture():
                self.shape.graph_note = note
            else:
                timed = self.rounds(References(ev.expected, inputs))
                fresh = self.fresh()
                for name, replays in timed.items():
                    self.results[name].graph = replays.timing(len(self.sets), n_sets, fresh[name], p.graph_replays)
                self.shape.timed_by, self.shape.graph_seeds = "graph", seeds
            for key, proc in (("candidate", self.t.cand), ("baseline", self.t.base)):
                proc.send(Release(names=list(self.sides[key])))
                proc.recv()
        finally:
            for side in self.sides.values():
                for binding in side.values():
                    binding.free()

    def message(self, name: str, replays: int) -> Graph:
        """Every replay block has the one form (capture, lead, timed, fresh): the candidate cannot tell which count."""
        return Graph(fn=name, inputs="gin", sets=self.sets, replays=replays, ring="gring")

    def capture(self) -> str | None:
        """Every callable captures its graph and replays it once; why not, where one could not."""
        for name in self.t.names:
            clocked = self.exchange(name, 1, watch=False)  # the capture's warm-up calls run before `go`
            done = clocked.done
            if done.error is not None and not any(h.reason == Reason.FORBIDDEN_CALL for h in done.hints):
                return f"{name} could not be captured in a CUDA graph: {done.error[-500:]}"
            ran = self.t.ran(name, clocked, 0.0)
            if name == "candidate":
                for f in ran.hints:
                    self.report.add(f.model_copy(update={"shape": self.case.name}))
        return None

    def exchange(
        self, name: str, replays: int, before_go: Callable[[], None] | None = None, watch: bool = True
    ) -> Clocked:
        ring = self.sides["candidate"]["gring"] if name == "candidate" else None
        calls = len(self.sets) * replays
        return self.t.exchange(name, self.message(name, replays), calls, ring, before_go, watch)

    def block(self, name: str, replays: int, before_go: Callable[[], None] | None = None) -> Ran:
        """A block of `replays` replays, its time per call that of the replays alone: the ring copy after the last
        replay is the same for every callable, a few microseconds in a block of milliseconds."""
        clocked = self.exchange(name, replays, before_go)
        calls = len(self.sets) * replays
        return self.t.ran(name, clocked, self.t.cal.per_call(clocked.ms, calls, copies=0))

    def rounds(self, refs: References) -> dict[str, Replays]:
        p, t = self.p, self.t
        own = self.sides["candidate"]
        pristine = [raw.clone() for raw in own["gin"].raws]
        timed = {n: Replays() for n in t.names}
        lead = lead_replays([r.median_ms for r in self.results.values()], len(self.sets), p.lead_ms)
        for turn in range(p.graph_rounds):
            for name in t.names if turn % 2 == 0 else t.names[::-1]:
                if name == "candidate":
                    own["gring"].poison()
                hints = self.block(name, lead).hints
                if name == "candidate" and t.pick.random() < p.spot_check_p:  # judged as often as a timed block
                    spot_check(t.pick, self.ev.tol, self.report, self.case, self.shape, own["gring"], refs, self.sets)
                if name == "candidate":
                    own["gring"].poison()
                ran, mine = self.block(name, p.graph_replays), timed[name]
                mine.per_call.append(ran.per_call_ms)
                mine.block.append(ran.ms)
                if name == "candidate":
                    check_inputs(self.report, self.case, self.shape, hints + ran.hints, own["gin"].raws, pristine)
                    spot_check(t.pick, self.ev.tol, self.report, self.case, self.shape, own["gring"], refs, self.sets)
        return timed

    def fresh(self) -> dict[str, float]:
        """One replay of each callable on input sets rewritten with inputs none has seen: the baselines' before
        their turns, the candidate's by the harness once its block's gate has passed; the candidate's outputs judged
        at FRESH_CHECKS calls."""
        t, ev = self.t, self.ev
        count = len(self.sides["candidate"]["gin"].groups)
        inputs = [ev.make_inputs(self.case.dims, ev.rng.randrange(2**SEED_BITS)) for _ in range(count)]
        own = self.sides["candidate"]

        def write(side: dict[str, SharedBinding] = own) -> None:
            for views, group in zip(side["gin"].groups, inputs, strict=True):
                for view, tensor in zip(views, group, strict=True):
                    view.copy_(tensor)

        t.cand.freeze()
        write(self.sides["baseline"])
        refs = References(ev.expected, inputs)
        times: dict[str, float] = {}
        for name in t.names if t.pick.random() < 0.5 else t.names[::-1]:
            if name == "candidate":
                own["gring"].poison()
            ran = self.block(name, 1, write if name == "candidate" else None)
            times[name] = ran.per_call_ms
            if name == "candidate":
                current = [v for views in own["gin"].groups for v in views]
                check_inputs(self.report, self.case, self.shape, ran.hints, current, [x for g in inputs for x in g])
                for _ in range(FRESH_CHECKS):
                    spot_check(t.pick, ev.tol, self.report, self.case, self.shape, own["gring"], refs, self.sets)
        return times


def time_under_graphs(t: TimingPhase, report: EvalReport, case: Case, results: dict[str, Timing]) -> None:
    """Time the shape under CUDA graphs too, where it qualifies (`graph_below_ms`); adds `graph` to each result."""
    timer = GraphTimer(t, report, case, results)
    if timer.wanted():
        timer.run()
