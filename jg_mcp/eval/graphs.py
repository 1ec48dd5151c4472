"""Timing under CUDA graphs, at shapes where the fastest callable takes a few microseconds per call
(`graph_below_ms`): there a per-call loop's flush and events add microseconds to every call and its times move
by 5-15% from one process to the next, where a CUDA graph of calls rotating over cold inputs repeated within 0.8%
(eval/results/h200/probe_graph.json). Such a shape is first timed per call like every other (every check of
jg_mcp/eval/timing.py runs there), then each callable in its own process captures one graph of `calls` calls
rotating over `sets` input sets, the fewest whose calls move `graph_bytes` together (no flush: a set has left the
L2 before it is read again; no pad: the graph queues every launch before the first runs). There are as many calls
as fill a replay of `graph_replay_ms` at the fastest baseline's per-call time (`replay_calls`), so that the
harness's own work in each block, which its clock sees too, is a small share of the block. Candidate and baselines
take turns (A B, then B A), each turn a lead of untimed replays (the callable's own steady state; as many for every
callable, sized by the slowest callable's per-call time, so a candidate that reports forged small times cannot make
the harness replay its graph for minutes), then a timed
block of `graph_replays` replays, CUDA events around each; a time is a replay's time divided by its calls. The
speedups, rates and floor check then use these times for every callable alike (`ShapeResult.timed_by`).

The candidate captures its own graph, so it can tell it is being captured and record other work than it runs
eagerly. What the harness believes is what it checks from outside:
- after each candidate block it reads back the outputs of the block's last replay (the worker copies call i's
  outputs into ring slot i, poisoned before the block) and judges one call of its choosing, and reads back the
  input sets;
- its own clock around each block must not see more time beyond the replays' reported times than it sees for the
  baselines (work done once per block outside the replays, such as computing the checked outputs after empty
  replays, is a share of the block a few replays long: TIMING_ESCAPE);
- after the timed rounds it rewrites every input set with inputs none has seen (the candidate's processes
  stopped meanwhile) and times one replay of each callable: a candidate that is faster on the sets it has seen,
  beyond what the baselines show, is caching (CACHED_OUTPUT), and those outputs are judged too;
- the graph's time is held to the physical floor like any other.
A callable that cannot be captured (one that waits on the host, say) leaves the shape timed per call, for every
callable, with the reason in `graph_note`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from jg_mcp.eval.memory import free_bytes, graph_ring_bytes, nbytes
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import EvalReport, GraphTiming, Timing
from jg_mcp.eval.sizing import MAX_LEAD_CALLS, iqm, rotation
from jg_mcp.eval.timing_checks import check_inputs, spot_check
from jg_mcp.eval.wire.buffers import SharedBinding
from jg_mcp.eval.wire.messages import Graph, Release
from jg_mcp.goals import SEED_BITS

if TYPE_CHECKING:
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
    return min(most, max(3, math.ceil(floor / max(1.0, call_bytes))))


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
    """Each timed replay's reported time divided by its calls."""
    device: list[float] = field(default_factory=list)
    """Per timed block, its replays' reported times together."""
    unaccounted: list[float] = field(default_factory=list)
    """Per timed block, the harness's clock around it beyond `device`."""

    def timing(self, calls: int, sets: int, fresh_ms: float) -> GraphTiming:
        """The callable's graph time, with its fresh replay's time per call."""
        ts = self.per_call
        return GraphTiming(
            median_ms=statistics.median(ts),
            iqm_ms=iqm(ts),
            q10_ms=min(ts) if len(ts) < 10 else statistics.quantiles(ts, n=10)[0],
            q90_ms=max(ts) if len(ts) < 10 else statistics.quantiles(ts, n=10)[-1],
            replays=len(ts),
            calls=calls,
            sets=sets,
            unaccounted_ms=statistics.median(self.unaccounted),
            block_ms=statistics.median(self.device),
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
                for _ in self.sets:
                    side["gring"].add_group(like)
            for key, proc in (("candidate", self.t.cand), ("baseline", self.t.base)):
                for binding in self.sides[key].values():
                    proc.bind(binding)
            if note := self.capture():
                self.shape.graph_note = note
            else:
                timed = self.rounds(References(ev.expected, inputs))
                fresh = self.fresh()
                for name, replays in timed.items():
                    self.results[name].graph = replays.timing(len(self.sets), n_sets, fresh[name])
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
            done, _ = self.t.exchange(name, self.message(name, 1))
            if done.error is not None and not any(h.reason == Reason.FORBIDDEN_CALL for h in done.hints):
                return f"{name} could not be captured in a CUDA graph: {done.error[-500:]}"
            ran = self.t.ran(name, done, 0.0, 1)
            if name == "candidate":
                for f in ran.hints:
                    self.report.add(f.model_copy(update={"shape": self.case.name}))
        return None

    def block(self, name: str, replays: int) -> Ran:
        return self.t.ran(name, *self.t.exchange(name, self.message(name, replays)), replays)

    def rounds(self, refs: References) -> dict[str, Replays]:
        p, t, calls = self.p, self.t, len(self.sets)
        own = self.sides["candidate"]
        pristine = [raw.clone() for raw in own["gin"].raws]
        timed = {n: Replays() for n in t.names}
        lead = lead_replays([r.median_ms for r in self.results.values()], calls, p.lead_ms)
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
                mine.per_call += ran.times
                mine.device.append(sum(ran.times) * calls)
                mine.unaccounted.append(ran.host_ms - mine.device[-1])
                if name == "candidate":
                    check_inputs(self.report, self.case, self.shape, hints + ran.hints, own["gin"], pristine)
                    spot_check(t.pick, self.ev.tol, self.report, self.case, self.shape, own["gring"], refs, self.sets)
        return timed

    def fresh(self) -> dict[str, float]:
        """One replay of each callable on input sets rewritten with inputs none has seen, the candidate's
        processes stopped while they are written; the candidate's outputs judged at FRESH_CHECKS calls."""
        t, ev = self.t, self.ev
        count = len(self.sides["candidate"]["gin"].groups)
        inputs = [ev.make_inputs(self.case.dims, ev.rng.randrange(2**SEED_BITS)) for _ in range(count)]
        t.cand.freeze()
        for side in self.sides.values():
            for views, group in zip(side["gin"].groups, inputs, strict=True):
                for view, tensor in zip(views, group, strict=True):
                    view.copy_(tensor)
        own = self.sides["candidate"]
        pristine = [raw.clone() for raw in own["gin"].raws]
        refs = References(ev.expected, inputs)
        times: dict[str, float] = {}
        for name in t.names if t.pick.random() < 0.5 else t.names[::-1]:
            if name == "candidate":
                own["gring"].poison()
            ran = self.block(name, 1)
            times[name] = ran.times[0]
            if name == "candidate":
                check_inputs(self.report, self.case, self.shape, ran.hints, own["gin"], pristine)
                for _ in range(FRESH_CHECKS):
                    spot_check(t.pick, ev.tol, self.report, self.case, self.shape, own["gring"], refs, self.sets)
        return times


def time_under_graphs(t: TimingPhase, report: EvalReport, case: Case, results: dict[str, Timing]) -> None:
    """Time the shape under CUDA graphs too, where it qualifies (`graph_below_ms`); adds `graph` to each result."""
    timer = GraphTimer(t, report, case, results)
    if timer.wanted():
        timer.run()
