"""Timing: the candidate in its process and the baselines in theirs take turns in blocks of back-to-back calls, each
block clocked by the harness itself (jg_mcp/eval/clock.py), and the harness reads back outputs at random.

What a time means: the device time of one call on inputs that have left the L2 (the calls rotate over input sets
spanning `cold_bytes` together, so a set is read again only after that many bytes: no flush that the candidate's
process runs and could skip), in the callable's own sustained steady state (each timed block follows a lead block
of ~lead_ms of the same calls, whose times are not used, so the clocks follow this callable's own power draw, not
the previous one's), with its launches hidden (the GPU is held behind the harness's gate until the whole block is
queued), by the harness's own CUDA events around the block, ordered against the worker's stream by interprocess
events, less what the harness measures on the baselines' process for the ordering of a block and for copying a
call's outputs into its ring slot, divided by the block's calls. On the CPU stand-in the harness's clock is the
worker process's CPU clock. Each call's outputs are copied into the harness's ring, a slot per call, poisoned
before the block; when the block ends the harness reads a sample of every slot at once (an early `done` leaves
poison there) and judges a call of its choosing. A shape whose fastest callable takes under `graph_below_ms` per
call is timed under CUDA graphs too, and its speedups are the graphs' (jg_mcp/eval/graphs.py; every check here
runs there first). Blocks take turns A B, then B A, so drift between blocks cancels. Calls rotate over the input
sets call by call (in the lead blocks too), as a model's next call to a kernel reads other tensors; each call's
output is freed before the next call, as under do_bench.

Fresh-input calls (inputs the harness writes into the process's buffers once the block's gate has passed, so no
callable could have seen them) must be about as fast as the timed ones, as they are for the baselines. The
candidate's process and the baselines' each map copies of their own (inputs, ring, fresh inputs): the candidate
cannot write what a baseline reads while it is timed, and its whole process tree is stopped (SIGSTOP, from the
harness) while a baseline is timed, so none of its code runs beside the baselines' calls.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from jg_mcp.errors import JgError
from jg_mcp.eval.checks import call_findings
from jg_mcp.eval.clock import BlockClock, Calibration, Clocked, calibrate
from jg_mcp.eval.clocks import ClockSampler, device_sampler
from jg_mcp.eval.gate import BUSY_GAP_MS
from jg_mcp.eval.graphs import References, time_under_graphs
from jg_mcp.eval.memory import plan_shape, unfit
from jg_mcp.eval.options import TimingParams
from jg_mcp.eval.processes.process import CandidateGone, WorkerProcess
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import EvalReport, Finding, ShapeResult, Timing, TimingMethod
from jg_mcp.eval.scoring import graph_findings, seen_inputs_gain
from jg_mcp.eval.sizing import block_sizes, lead_sizes, rotation, summarize
from jg_mcp.eval.timing_checks import check_inputs, fresh_pass, spot_check
from jg_mcp.eval.wire.buffers import OutOfDeviceMemory, SharedBinding
from jg_mcp.eval.wire.messages import NULL_FN, Block, Done, Graph, Release, Warm
from jg_mcp.goals import SEED_BITS

if TYPE_CHECKING:
    from jg_mcp.eval.harness import Evaluation
    from jg_mcp.eval.shapes import Case


ENDS_A_BLOCK = frozenset(
    {Reason.FORBIDDEN_CALL, Reason.NOT_PLAIN_TENSOR, Reason.WRONG_DTYPE, Reason.WRONG_SHAPE, Reason.WRONG_DEVICE}
)
"""Why a candidate's block can end, named by the worker: a library op refused there, or an output its ring slot
cannot take as it is."""

CANDIDATE, BASELINE = "candidate", "baseline"
SIDES = (CANDIDATE, BASELINE)
"""Each process gets bindings of its own (inputs, output ring, fresh inputs), each a copy the harness made: the
baselines' process never maps memory the candidate's process can write, so the candidate cannot change what a
baseline reads while it is timed (the harness reads back only the candidate's inputs after its blocks)."""
CLOCKS = {
    "cuda": "the harness's CUDA events around each block, ordered against the worker's stream by interprocess events",
    "cpu": "the worker process's CPU clock, read by the harness around each block",
}
"""Which clock timed a shape's blocks, by device (`ShapeResult.clock`)."""


@dataclass
class Ran:
    """One block as the harness's clock saw it."""

    per_call_ms: float
    """The harness's time of the block, less the calibrated ordering and copies, divided by its calls."""
    ms: float
    """The harness's time of the whole block."""
    hints: list[Finding]


def method(p: TimingParams) -> TimingMethod:
    """The timing parameters of a run, as the report states them."""
    return TimingMethod(description=__doc__.split("\n\n")[1].replace("\n", " "), params=p)


class TimingPhase:
    """Times every timed shape: the candidate's timing process and the baseline process take turns."""

    def __init__(self, ev: Evaluation, candidate: WorkerProcess, baseline: WorkerProcess):
        self.ev, self.cand, self.base = ev, candidate, baseline
        self.p = ev.o.timing
        self.pick = random.SystemRandom()
        g = ev.goal.goal
        self.names = ["candidate", *[n for n, b in g.baselines.items() if ev.device in b.devices]]
        self.clocks = {
            CANDIDATE: BlockClock(candidate, ev.device),
            BASELINE: BlockClock(baseline, ev.device, watch=True),
        }
        self.cal = Calibration(ordering_ms=0.0, copy_ms=0.0)
        """The shape being timed's calibration (`clock.calibrate`, on the baselines' process)."""
        self.sampler: ClockSampler | None = None
        """NVML's sampler of the shape being timed (GPU only); the timed blocks label its samples."""
        self.thread: threading.Thread | None = None
        self.ready = False
        self.failure: BaseException | None = None
        self.prepare_s = 0.0
        self.sides: dict[str, dict[str, SharedBinding]] = {}
        """The shape being timed's bindings of each side (inputs, ring, fresh inputs)."""
        self.refs: Sequence[list[torch.Tensor]] = []
        """The references of the shape's timed input sets."""
        self.warm_walls: dict[str, dict[str, float]] = {}
        """Per shape, the wall time of its first calls (written by the preparing thread)."""

    def start(self, report: EvalReport, cases: list[Case]) -> None:
        """Prepare in a thread while the correctness phase runs in the other candidate process."""
        self.thread = threading.Thread(target=self.prepare, args=(report, cases), name="jg-eval-prepare", daemon=True)
        self.thread.start()

    def prepare(self, report: EvalReport, cases: list[Case]) -> None:
        """Wait for both timing processes and hand them their clocks' events, then call every callable once at
        every timed shape (compilation, autotuning, caches) on inputs made for this and thrown away."""
        begin = time.monotonic()
        try:
            self.ready = self.ev.ready(self.cand, report) is not None
            self.ev.ready(self.base, report)
            if self.ready:
                self.clocks[BASELINE].open()
                self.clocks[CANDIDATE].open()
            for case in cases if self.ready else []:
                self.warm(report, case)
        except CandidateGone as gone:
            report.add(gone.finding)
            self.ready = False
        except BaseException as exc:
            self.failure = exc
        finally:
            self.prepare_s = time.monotonic() - begin

    def warm(self, report: EvalReport, case: Case) -> None:
        inputs = self.ev.make_inputs(case.dims, secrets.randbits(SEED_BITS))
        own = {proc: SharedBinding("warm", self.ev.device) for proc in (self.cand, self.base)}
        walls = self.warm_walls.setdefault(case.name, {})
        try:
            for binding in own.values():
                binding.add_copy(inputs)
            self.ev.sync()
            for proc, binding in own.items():
                proc.bind(binding)
            mark = time.monotonic()
            for name in self.names:
                self.worker(name).send(Warm(fn=name, inputs=("warm", 0)))
            for name in self.names:
                done = self.worker(name).expect(Done)
                walls[f"warm_{'candidate' if name == 'candidate' else 'baselines'}"] = time.monotonic() - mark
                if name != "candidate" and done.error:
                    raise JgError(f"baseline {name} failed at {case.name}: {done.error}")
                if name == "candidate":
                    for f in done.hints + call_findings(done):
                        report.add(f.model_copy(update={"shape": case.name, "detail": f"{f.detail} (warm-up)"}))
            for proc in (self.cand, self.base):
                proc.send(Release(names=["warm"]))
                proc.recv()
        finally:
            for binding in own.values():
                binding.free()

    def run(self, report: EvalReport, cases: list[Case]) -> None:
        report.timing = method(self.p)
        if self.thread is None:
            self.start(report, cases)
        waited = time.monotonic()
        assert self.thread is not None
        self.thread.join()
        report.phases["timing_prepare"] = self.prepare_s
        report.phases["timing_prepare_wait"] = time.monotonic() - waited
        if self.failure is not None:
            raise self.failure
        if not self.ready:
            return
        by_name = {s.name: s for s in report.shapes}
        try:
            self.time_cases(report, cases, by_name)
        finally:
            for clock in self.clocks.values():
                clock.close()

    def time_cases(self, report: EvalReport, cases: list[Case], by_name: dict[str, ShapeResult]) -> None:
        try:
            for case in cases:
                self.ev.progress(f"time {case.name}")
                shape = by_name[case.name]
                shape.wall_s |= self.warm_walls.get(case.name, {})
                self.sampler = sampler = device_sampler(self.ev.device)
                mark = time.monotonic()
                with sampler or contextlib.nullcontext():
                    try:
                        self.time_case(report, case, shape)
                    except (OutOfDeviceMemory, torch.OutOfMemoryError) as short:  # the harness's, never the candidate's
                        shape.timing_skipped = f"the harness ran out of GPU memory: {str(short)[:300]}"
                        report.notes.append(f"{case.name}: not timed, {shape.timing_skipped}")
                        self.cand.thaw()  # it may be stopped while a baseline was timed
                        for proc in (self.cand, self.base):
                            proc.send(Release(names=["tin", "ring", "fresh", "gin", "gring"]))
                            proc.recv()
                shape.wall_s["time"] = time.monotonic() - mark
                shape.clocks = sampler.summary() if sampler else None
        except CandidateGone as gone:
            report.add(gone.finding)

    def worker(self, name: str) -> WorkerProcess:
        return self.cand if name == "candidate" else self.base

    def block(self, name: str, sets: list[int], inputs: str, before_go: Callable[[], None] | None = None) -> Ran:
        """One block, its outputs into the callable's ring. Every block has the one form (warm-up, estimate, lead,
        timed, fresh): the candidate cannot tell which of its blocks count."""
        message = Block(fn=name, inputs=inputs, sets=sets, ring="ring")
        ring = self.sides[CANDIDATE]["ring"] if name == CANDIDATE else None
        clocked = self.exchange(name, message, len(sets), ring, before_go)
        return self.ran(name, clocked, self.cal.per_call(clocked.ms, len(sets)))

    def lead_block(self, report: EvalReport, case: Case, shape: ShapeResult, name: str, sets: list[int]) -> Ran:
        """A block whose times go unused (warm-up, estimate, lead): the candidate's into a freshly poisoned ring,
        one of its calls judged as often as a timed block's, so work skipped there shows as it does in a timed one."""
        own = self.sides[CANDIDATE]
        if name == CANDIDATE:
            own["ring"].poison()
        ran = self.block(name, sets, "tin")
        if name == CANDIDATE and self.pick.random() < self.p.spot_check_p:
            spot_check(self.pick, self.ev.tol, report, case, shape, own["ring"], self.refs, sets)
        return ran

    def exchange(
        self,
        name: str,
        message: Block | Graph,
        calls: int,
        ring: SharedBinding | None,
        before_go: Callable[[], None] | None = None,
        watch: bool = True,
    ) -> Clocked:
        """Send one block to the callable's process and clock it (`BlockClock.run`); the candidate's process tree
        is stopped while a baseline runs. The candidate's ring is read when the block ends: a slot still poisoned
        then is a call that had not finished, however its process said it was done. With `watch`, another context's
        work during the block's gate, twice, ends timing (`not_busy`)."""
        side = CANDIDATE if name == CANDIDATE else BASELINE
        if name != "candidate":
            self.cand.freeze()  # no candidate code runs while a baseline is timed
        else:
            self.cand.thaw()  # before its clock starts: resuming it is no part of its time
        self.ev.sync()
        slots = min(calls, len(ring.groups)) if ring is not None else 0
        clocked = self.clocks[side].run(message, calls, ring, slots, before_go, watch)
        if watch and clocked.busy_ms > BUSY_GAP_MS:  # once more, what held the GPU given time to end
            clocked = self.clocks[side].run(message, calls, ring, slots, before_go)
            self.not_busy(side, clocked.busy_ms)
        if clocked.unwritten and clocked.done.error is None:
            first = clocked.unwritten[0]
            raise CandidateGone(
                Finding(
                    reason=Reason.TIMING_ESCAPE,
                    detail=f"the block said it was done while {len(clocked.unwritten)} of its {slots} calls had not "
                    f"written their outputs (call {first + 1}'s ring slot still held the harness's poison when the "
                    "block ended): work finished after the harness's clock stopped",
                )
            )
        return clocked

    def not_busy(self, side: str, busy_ms: float) -> None:
        """End timing if another CUDA context took the GPU from the harness's gate. Before a baseline's block the
        candidate's processes are stopped with every block of theirs ended, so it was GPU work of theirs that
        outlived its block (it would slow the baseline's calls and so flatter the candidate's); before a block of
        the candidate's own, it was work that started before the block's clock did (its calls run early, the `go`
        flag written by the candidate itself, or results computed beside the gate)."""
        if busy_ms <= BUSY_GAP_MS:
            return
        if side == BASELINE:
            what = (
                "GPU work of the candidate's kept running after its block while it was stopped and a baseline was next"
            )
        else:
            what = "GPU work of the candidate's ran before its block's clock started"
        held = f"another context held the GPU for {busy_ms:.2f} ms during the harness's gate, twice"
        raise CandidateGone(Finding(reason=Reason.TIMING_ESCAPE, detail=f"{what}: {held}"))

    def ran(self, name: str, clocked: Clocked, per_call_ms: float) -> Ran:
        """A block's time, or the end of timing: a baseline that failed, a candidate that failed."""
        done = clocked.done
        if done.error is not None:
            if name != "candidate":
                raise JgError(f"baseline {name} failed while timed: {done.error}")
            refused = [h for h in done.hints if h.reason in ENDS_A_BLOCK]
            if refused:
                raise CandidateGone(refused[0].model_copy(update={"detail": f"while timed: {refused[0].detail}"}))
            raise CandidateGone(Finding(reason=Reason.EXCEPTION, detail=f"while timed: {done.error[-1500:]}"))
        return Ran(per_call_ms, clocked.ms, list(done.hints))

    def time_case(self, report: EvalReport, case: Case, shape: ShapeResult) -> None:
        p, ev = self.p, self.ev
        seeds = [ev.rng.randrange(2**SEED_BITS)]
        first = ev.reference(case.dims, seeds[0])
        like = ev.output_like(first[1])
        shape.memory = plan = plan_shape(ev.device, first, like, shape.check_peak_bytes, p)
        if not plan.fits:
            shape.timing_skipped = unfit(plan)
            report.notes.append(f"{case.name}: {shape.timing_skipped}")
            return
        seeds += [ev.rng.randrange(2**SEED_BITS) for _ in range(plan.input_sets - 1)]
        made = [first[0], *(ev.make_inputs(case.dims, seed) for seed in seeds[1:])]
        refs = References(ev.expected, made)  # a set's reference is computed when one of its calls is judged
        refs.done[0] = first[1]
        slots = plan.ring_slots
        sides = {side: {n: SharedBinding(n, ev.device) for n in ("tin", "ring", "fresh")} for side in SIDES}
        self.sides, self.refs = sides, refs
        try:
            for bindings in sides.values():
                for inputs in made:
                    bindings["tin"].add_copy(inputs)
                bindings["ring"].add_ring(like, slots)
            for side, proc in ((CANDIDATE, self.cand), (BASELINE, self.base)):
                proc.bind(sides[side]["tin"])
                proc.bind(sides[side]["ring"])
            self.cand.freeze()  # the calibration is a baseline's turn
            sets = rotation(min(slots, p.max_block), len(refs))
            self.clocks[BASELINE].busiest_ms = 0.0  # the shape's own
            self.cal = calibrate(self.clocks[BASELINE], NULL_FN, "tin", sets, sides[BASELINE]["ring"])
            if self.clocks[BASELINE].busiest_ms > BUSY_GAP_MS:
                self.clocks[BASELINE].busiest_ms = 0.0
                self.cal = calibrate(self.clocks[BASELINE], NULL_FN, "tin", sets, sides[BASELINE]["ring"])
                self.not_busy(BASELINE, self.clocks[BASELINE].busiest_ms)
            shape.clock = CLOCKS[ev.device]
            shape.ordering_ms, shape.copy_ms = self.cal.ordering_ms, self.cal.copy_ms

            def measure(careful: bool) -> dict[str, Timing]:
                """The shape's timed rounds, then its fresh-input calls (each after a lead block when `careful`)."""
                results = self.rounds(report, case, shape, sides, refs, slots)
                begin = time.monotonic()
                fresh_pass(self, report, case, shape, sides, results, lead=careful)
                report.phases["timing_fresh"] = report.phases.get("timing_fresh", 0.0) + time.monotonic() - begin
                return results

            results = measure(careful=False)
            if suspicion := self.suspicion(results):
                shape.retimed = suspicion
                results = measure(careful=True)
            time_under_graphs(self, report, case, results)
            if shape.timed_by == "graph" and (suspicion := self.suspicion(results, graph=True)):
                shape.retimed = suspicion  # the graph timing's second run decides, as the per-call one's does
                time_under_graphs(self, report, case, results)
            shape.input_seeds = seeds
            shape.gate_busy_ms = self.clocks[BASELINE].busiest_ms if ev.device == "cuda" else None
            shape.candidate = results.pop(CANDIDATE)
            shape.baselines = results
            for side, proc in ((CANDIDATE, self.cand), (BASELINE, self.base)):
                proc.send(Release(names=list(sides[side])))
                proc.recv()
        finally:
            for bindings in sides.values():
                for b in bindings.values():
                    b.free()

    def suspicion(self, results: dict[str, Timing], graph: bool = False) -> str | None:
        """What the timing findings would say of these results (speed that needs seen inputs; with `graph`, of the
        CUDA-graph timing), else None: such a finding is reported only when a second timing of the shape (per
        call: every fresh call after a lead block) shows it too. Host noise or a power-capped clock can make one
        measurement look like it; a hack that depends on seen inputs shows it every time."""
        cand = results[CANDIDATE]
        bases = {n: r for n, r in results.items() if n != CANDIDATE}
        if graph:
            return next((detail for _, detail in graph_findings(cand, bases, self.p.fresh_slack)), None)
        return seen_inputs_gain(cand, bases, self.p.fresh_slack)

    def estimate(self, report: EvalReport, case: Case, shape: ShapeResult, n_sets: int) -> dict[str, float]:
        """Warm each callable up and measure its time per call by a block over the input sets once."""
        device: dict[str, float] = {}
        for name in self.names[1:] + self.names[:1]:
            if self.p.warmup:
                self.lead_block(report, case, shape, name, rotation(self.p.warmup * n_sets, n_sets))
            device[name] = self.lead_block(report, case, shape, name, list(range(n_sets))).per_call_ms
        return device

    def rounds(
        self,
        report: EvalReport,
        case: Case,
        shape: ShapeResult,
        sides: dict[str, dict[str, SharedBinding]],
        refs: Sequence[list[torch.Tensor]],
        slots: int,
    ) -> dict[str, Timing]:
        p, names, n_sets = self.p, self.names, len(refs)
        own = sides[CANDIDATE]  # the harness reads back the candidate's inputs and ring
        pristine = [raw.clone() for raw in own["tin"].raws]
        estimates = self.estimate(report, case, shape, n_sets)
        per_block = block_sizes(estimates, p.block_ms, min(p.max_block, slots))
        lead = lead_sizes(estimates, p.lead_ms)
        times: dict[str, list[float]] = {n: [] for n in names}
        calls: dict[str, int] = dict.fromkeys(names, 0)
        queued, rounds, checked, begin = dict.fromkeys(names, 0), 0, 0, time.monotonic()
        sampled = len(self.sampler.samples) if self.sampler else 0  # a second timing's clocks are its own

        def next_sets(name: str, count: int) -> list[int]:
            """The callable's next `count` calls, rotating over the input sets where its last call left off."""
            first, queued[name] = queued[name], queued[name] + count
            return rotation(count, n_sets, first)

        def run(name: str) -> tuple[Ran, list[int]]:
            """A lead block of `name` (its times unused), then a timed block, both rotating over the input sets; a
            candidate's each into a freshly poisoned ring, its inputs read back after them."""
            hints = self.lead_block(report, case, shape, name, next_sets(name, lead[name])).hints if lead[name] else []
            if name == "candidate":
                own["ring"].poison()
            sets = next_sets(name, per_block[name])
            if self.sampler:
                self.sampler.owner = name
            try:
                ran = self.block(name, sets, "tin")
            finally:
                if self.sampler:
                    self.sampler.owner = None
            if name == "candidate":
                check_inputs(report, case, shape, hints + ran.hints, own["tin"].raws, pristine)
            return ran, sets

        while True:
            for name in names if rounds % 2 == 0 else names[::-1]:
                ran, sets = run(name)
                times[name].append(ran.per_call_ms)
                calls[name] += len(sets)
                if name == "candidate" and self.pick.random() < p.spot_check_p:
                    checked += spot_check(self.pick, self.ev.tol, report, case, shape, own["ring"], refs, sets)
            rounds += 1
            if rounds < p.min_rounds or min(calls.values()) < p.min_reps:
                continue
            worst = max(summarize(times[n])["rel_se_median"] for n in names)
            full = max(calls.values()) >= p.max_reps
            if worst < p.target_rel_se or time.monotonic() - begin > p.budget_s or full:
                break
        while checked < p.spot_checks:
            checked += spot_check(self.pick, self.ev.tol, report, case, shape, own["ring"], refs, run("candidate")[1])

        def result(n: str) -> Timing:
            spread = summarize(times[n])
            clock = self.clocks[CANDIDATE if n == CANDIDATE else BASELINE]
            return Timing(
                median_ms=spread["median_ms"],
                iqm_ms=spread["iqm_ms"],
                iqr_ms=spread["iqr_ms"],
                q10_ms=spread["q10_ms"],
                q90_ms=spread["q90_ms"],
                reps=calls[n],
                blocks=len(times[n]),
                rel_se_median=spread["rel_se_median"],
                block=per_block[n],
                lead=lead[n],
                enqueue_ms=clock.enqueue.get(n),
                host_waits=clock.waits.get(n, False),
                clocks=self.sampler.summary(n, sampled) if self.sampler else None,
            )

        return {n: result(n) for n in names}
