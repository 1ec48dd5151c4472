"""Timing: the candidate in its process and the baselines in theirs take turns in blocks of back-to-back calls,
and the harness checks every candidate block against its own clock and reads back outputs at random.

What a time means: the device time of one call with a cold L2 (a flush buffer zeroed before every call), in
the callable's own sustained steady state (each timed block follows a lead block of ~lead_ms of the same calls,
whose times are not used, so the clocks follow this callable's own power draw, not the previous one's; on a
power-capped GPU a short block of a power-hungry kernel otherwise runs at the clock a lighter one left), by CUDA
events around the call in the process that runs it: the definition of `triton.testing.do_bench`, for candidate
and baselines alike. Launches are hidden: where some callable needs about as much host time to queue a call as
the GPU takes to run it (a launch-bound shape, a few microseconds of work), the GPU sleeps for a pad after each
flush, the same pad for every callable, so the call's launches are queued before its start event; its time is
then device time, not a mix of host and device time that changes from run to run. It is not what the same calls
take back to back under a CUDA graph: each call here also pays a few microseconds for the flush before it and the
events around it (on the H200, eval/results/h200/probe_graph.json: rope's solution 7.1 us per call here, 3.5 us in a
graph of calls rotating over 256 MiB of inputs; a graph repeated within 0.8% over processes where this loop moved
by 1-7%), so at a few-microsecond shape a speedup here is smaller than under a graph. A shape whose fastest
callable takes under `graph_below_ms` per call is therefore timed under CUDA graphs too, and its speedups are the
graphs' (jg_mcp/eval/graphs.py; every check here runs there first). Blocks
take turns A B, then B A, so drift between blocks cancels. Calls rotate over the input sets call by call (in the
lead blocks too): each call reads a set the previous call did not, as a model's next call to a kernel reads other
tensors. The reason is reproducibility, measured on the H200 (eval/timing_probe.py --repeats 3,
eval/results/h200/probe_repeats3.json): at 5-45 us shapes, do_bench repeated on one set in one process on the same
tensors moved by up to 18% between repeats, and so did this loop on one set (each settles in one of two times
~1 us apart, which one changing from measurement to measurement). Rotating over three sets, this loop repeated
within 5% for every callable and do_bench within 4% for all but one (18%), and their ratios agreed within 3%.
Each call's output is freed before the next call, as under do_bench.

Why the candidate's events can be believed: the harness times each block from outside (send to reply, its own
clock). Per call, the time it saw beyond the reported device times (`unaccounted_ms`: the flush, the pad, the
output copy, host gaps) must match what it saw for the baselines, measured the same way; forged times, work after
the timed region or on another stream show up there (TIMING_ESCAPE). After each call the worker copies the outputs
into a ring of harness buffers with a slot per call of the block, poisoned before the block; the harness checks
a call of its choosing after the block, so any call may be the one checked. Fresh-input calls (inputs written
into the process's buffers just before each single call, so no callable could have seen them) must be about as
fast as the timed ones, as they are for the baselines. The candidate's process and the baselines' each map copies
of their own (inputs, ring, fresh inputs): the candidate cannot write what a baseline reads while it is timed,
and its whole process tree is stopped (SIGSTOP, from the harness) while a baseline is timed, so none of its code
runs beside the baselines' calls.
"""

from __future__ import annotations

import contextlib
import math
import random
import secrets
import statistics
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from jg_mcp.errors import JgError
from jg_mcp.eval.checks import call_findings
from jg_mcp.eval.clocks import ClockSampler, device_sampler
from jg_mcp.eval.graphs import time_under_graphs
from jg_mcp.eval.memory import plan_shape, unfit
from jg_mcp.eval.options import TimingParams
from jg_mcp.eval.processes.process import CandidateGone, WorkerProcess
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import EvalReport, Finding, ShapeResult, Timing, TimingMethod
from jg_mcp.eval.scoring import escaped, graph_findings, seen_inputs_gain
from jg_mcp.eval.sizing import block_sizes, flush_time_ms, lead_sizes, pad_for, rotation, summarize, waits_for_gpu
from jg_mcp.eval.timing_checks import check_inputs, fresh_pass, spot_check
from jg_mcp.eval.wire.buffers import OutOfDeviceMemory, SharedBinding
from jg_mcp.eval.wire.messages import Block, BlockDone, Done, Graph, Release, Warm
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


@dataclass
class Ran:
    """One block as the harness saw it."""

    times: list[float]
    """The reported device time of each call."""
    host_ms: float
    """The harness's own clock around the block."""
    hints: list[Finding]
    enqueue_ms: float
    """The worker's host time per call to queue the calls (a hint: only ever bounded by host_ms)."""


def method(p: TimingParams) -> TimingMethod:
    """The timing parameters of a run, as the report states them."""
    return TimingMethod(
        description=__doc__.split("\n\n")[1].replace("\n", " "),
        input_sets=p.input_sets,
        warmup_calls=p.warmup,
        min_reps=p.min_reps,
        max_reps=p.max_reps,
        target_rel_se=p.target_rel_se,
        budget_s=p.budget_s,
        l2_flush_bytes=p.flush_bytes,
        block_ms=p.block_ms,
        lead_ms=p.lead_ms,
        max_block=p.max_block,
        min_rounds=p.min_rounds,
        sync_ms=0.0,
        fresh_sets=p.fresh,
        spot_checks=p.spot_checks,
        graph_below_ms=p.graph_below_ms,
        graph_bytes=p.graph_bytes,
        graph_calls=p.graph_calls,
        graph_replay_ms=p.graph_replay_ms,
        graph_replays=p.graph_replays,
        graph_rounds=p.graph_rounds,
    )


class TimingPhase:
    """Times every timed shape: the candidate's timing process and the baseline process take turns."""

    def __init__(self, ev: Evaluation, candidate: WorkerProcess, baseline: WorkerProcess):
        self.ev, self.cand, self.base = ev, candidate, baseline
        self.p = ev.o.timing
        self.pick = random.SystemRandom()
        g = ev.goal.goal
        self.names = ["candidate", *[n for n, b in g.baselines.items() if ev.device in b.devices]]
        self.pad_ms = 0.0
        self.flush_ms = 0.0
        self.sampler: ClockSampler | None = None
        """NVML's sampler of the shape being timed (GPU only); the timed blocks label its samples."""
        self.thread: threading.Thread | None = None
        self.ready = False
        self.failure: BaseException | None = None
        self.prepare_s = 0.0
        self.sides: dict[str, dict[str, SharedBinding]] = {}
        """The shape being timed's bindings of each side (inputs, ring, fresh inputs)."""
        self.refs: list[list[torch.Tensor]] = []
        """The references of the shape's timed input sets."""
        self.warm_walls: dict[str, dict[str, float]] = {}
        """Per shape, the wall time of its first calls (written by the preparing thread)."""

    def start(self, report: EvalReport, cases: list[Case]) -> None:
        """Prepare in a thread while the correctness phase runs in the other candidate process."""
        self.thread = threading.Thread(target=self.prepare, args=(report, cases), name="jg-eval-prepare", daemon=True)
        self.thread.start()

    def prepare(self, report: EvalReport, cases: list[Case]) -> None:
        """Wait for both timing processes, then call every callable once at every timed shape (compilation,
        autotuning, caches) on inputs made for this and thrown away."""
        begin = time.monotonic()
        try:
            self.ready = self.ev.ready(self.cand, report) is not None
            self.ev.ready(self.base, report)
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
        self.flush_ms = flush_time_ms(self.p.flush_bytes) if self.ev.device == "cuda" else 0.0
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

    def block(self, name: str, sets: list[int], inputs: str) -> Ran:
        """One block, with the shape's pad; its outputs go to the callable's ring. Every block has the one form
        (warm-up, estimate, lead, timed, fresh): the candidate cannot tell which of its blocks count."""
        block = Block(
            fn=name, inputs=inputs, sets=sets, ring="ring", flush_bytes=self.p.flush_bytes, pad_ms=self.pad_ms
        )
        return self.ran(name, *self.exchange(name, block), len(sets))

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

    def exchange(self, name: str, message: Block | Graph) -> tuple[BlockDone, float]:
        """Send one block to the callable's process and wait for it, timed by the harness's own clock; the
        candidate's process tree is stopped while a baseline runs."""
        proc = self.worker(name)
        clock = proc.cpu_ms if self.ev.device == "cpu" else (lambda: time.perf_counter() * 1e3)
        if name != "candidate":
            self.cand.freeze()  # no candidate code runs while a baseline is timed
        else:
            self.cand.thaw()  # before its clock starts: resuming it is no part of its time
        self.ev.sync()
        start = clock()
        proc.send(message)
        done = proc.expect(BlockDone)
        return done, clock() - start

    def ran(self, name: str, done: BlockDone, host_ms: float, count: int) -> Ran:
        """A block's answer, or the end of timing: a baseline that failed, a candidate that failed or answered
        with times that are not one per timed call (`count`)."""
        if done.error is not None:
            if name != "candidate":
                raise JgError(f"baseline {name} failed while timed: {done.error}")
            refused = [h for h in done.hints if h.reason in ENDS_A_BLOCK]
            if refused:
                raise CandidateGone(refused[0].model_copy(update={"detail": f"while timed: {refused[0].detail}"}))
            raise CandidateGone(Finding(reason=Reason.EXCEPTION, detail=f"while timed: {done.error[-1500:]}"))
        if len(done.times_ms) != count or not all(math.isfinite(t) and t >= 0 for t in done.times_ms):
            raise CandidateGone(
                Finding(
                    reason=Reason.TAMPERED,
                    detail="the block's reported times do not match its calls (a forged or corrupted message)",
                )
            )
        return Ran(done.times_ms, host_ms, list(done.hints), min(done.enqueue_ms, host_ms / count))

    def time_case(self, report: EvalReport, case: Case, shape: ShapeResult) -> None:
        p, ev = self.p, self.ev
        seeds = [ev.rng.randrange(2**SEED_BITS)]
        made = [ev.reference(case.dims, seeds[0])]
        like = ev.output_like(made[0][1])
        shape.memory = plan = plan_shape(ev.device, made[0], like, shape.check_peak_bytes, p)
        if not plan.fits:
            shape.timing_skipped = unfit(plan)
            report.notes.append(f"{case.name}: {shape.timing_skipped}")
            return
        seeds += [ev.rng.randrange(2**SEED_BITS) for _ in range(plan.input_sets - 1)]
        made += [ev.reference(case.dims, seed) for seed in seeds[1:]]
        refs = [r for _, r in made]
        slots = plan.ring_slots
        sides = {side: {n: SharedBinding(n, ev.device) for n in ("tin", "ring", "fresh")} for side in SIDES}
        self.sides, self.refs = sides, refs
        try:
            for bindings in sides.values():
                for inputs, _ in made:
                    bindings["tin"].add_copy(inputs)
                for _ in range(slots):
                    bindings["ring"].add_group(like)
            for side, proc in ((CANDIDATE, self.cand), (BASELINE, self.base)):
                proc.bind(sides[side]["tin"])
                proc.bind(sides[side]["ring"])

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
        """What the timing findings would say of these results (a timing escape or speed that needs seen inputs;
        with `graph`, of the CUDA-graph timing), else None: such a finding is reported only when a second timing
        of the shape (per call: every fresh call after a lead block) shows it too. Host noise or a power-capped
        clock can make one measurement look like either; a hack that depends on either shows it every time."""
        cand = results[CANDIDATE]
        bases = {n: r for n, r in results.items() if n != CANDIDATE}
        share, slack = self.p.escape_share, self.p.fresh_slack
        if graph:
            return next((detail for _, detail in graph_findings(cand, bases, share, slack)), None)
        return escaped(cand, bases, share, self.pad_ms) or seen_inputs_gain(cand, bases, slack)

    def estimate(self, report: EvalReport, case: Case, shape: ShapeResult, n_sets: int, most: int) -> dict[str, float]:
        """Warm each callable up and measure its device time per call; then run one block of it as long as a timed
        block (at most `most` calls, unpadded) for its host time per call in its steady state, and set the shape's
        pad from those. A callable's first calls are no guide to its host time: on the H200 one eval of gemm_fp8
        queued cuBLASLt at 0.2 ms per call in its first blocks and 0.11 ms in its timed blocks, enough to pad
        that eval of a 0.3 ms GEMM and not its repeat, and on the power-capped GPU the pad moved the speedup 12%."""
        p, names = self.p, self.names
        self.pad_ms = 0.0
        device: dict[str, float] = {}
        order = names[1:] + names[:1]
        for name in order:
            if p.warmup:
                self.lead_block(report, case, shape, name, rotation(p.warmup * n_sets, n_sets))
            device[name] = statistics.median(self.lead_block(report, case, shape, name, list(range(n_sets))).times)
        sizes = block_sizes(device, p.block_ms, most)
        queue = {n: self.lead_block(report, case, shape, n, rotation(sizes[n], n_sets)).enqueue_ms for n in order}
        pad = pad_for(queue, device, self.flush_ms)
        self.pad_ms = pad if self.ev.device == "cuda" else 0.0
        shape.pad_ms, shape.launch_bound = self.pad_ms, self.pad_ms > 0
        return {n: device[n] + self.pad_ms for n in names}

    def rounds(
        self,
        report: EvalReport,
        case: Case,
        shape: ShapeResult,
        sides: dict[str, dict[str, SharedBinding]],
        refs: list[list[torch.Tensor]],
        slots: int,
    ) -> dict[str, Timing]:
        p, names, n_sets = self.p, self.names, len(refs)
        own = sides[CANDIDATE]  # the harness reads back the candidate's inputs and ring
        pristine = [raw.clone() for raw in own["tin"].raws]
        estimates = self.estimate(report, case, shape, n_sets, min(p.max_block, slots))
        per_block = block_sizes(estimates, p.block_ms, min(p.max_block, slots))
        lead = lead_sizes(estimates, p.lead_ms)
        times: dict[str, list[float]] = {n: [] for n in names}
        hosts: dict[str, list[float]] = {n: [] for n in names}
        gaps: dict[str, list[float]] = {n: [] for n in names}
        queues: dict[str, list[float]] = {n: [] for n in names}
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
                check_inputs(report, case, shape, hints + ran.hints, own["tin"], pristine)
            return ran, sets

        while True:
            for name in names if rounds % 2 == 0 else names[::-1]:
                ran, sets = run(name)
                times[name] += ran.times
                hosts[name].append(ran.host_ms / len(sets))
                gaps[name].append((ran.host_ms - sum(ran.times)) / len(sets))
                queues[name].append(ran.enqueue_ms)
                if name == "candidate" and self.pick.random() < p.spot_check_p:
                    checked += spot_check(self.pick, self.ev.tol, report, case, shape, own["ring"], refs, sets)
            rounds += 1
            if rounds < p.min_rounds or min(len(t) for t in times.values()) < p.min_reps:
                continue
            worst = max(summarize(times[n])["rel_se_median"] for n in names)
            full = max(map(len, times.values())) >= p.max_reps
            if worst < p.target_rel_se or time.monotonic() - begin > p.budget_s or full:
                break
        while checked < p.spot_checks:
            checked += spot_check(self.pick, self.ev.tol, report, case, shape, own["ring"], refs, run("candidate")[1])
        cuda = self.ev.device == "cuda"

        def result(n: str) -> Timing:
            spread, enqueue = summarize(times[n]), statistics.median(queues[n])
            return Timing(
                median_ms=spread["median_ms"],
                iqm_ms=spread["iqm_ms"],
                iqr_ms=spread["iqr_ms"],
                q10_ms=spread["q10_ms"],
                q90_ms=spread["q90_ms"],
                reps=len(times[n]),
                rel_se_median=spread["rel_se_median"],
                host_median_ms=statistics.median(hosts[n]),
                block=per_block[n],
                lead=lead[n],
                unaccounted_ms=statistics.median(gaps[n]),
                enqueue_ms=enqueue,
                host_waits=cuda and waits_for_gpu(enqueue, spread["median_ms"], self.flush_ms, self.pad_ms),
                clocks=self.sampler.summary(n, sampled) if self.sampler else None,
            )

        return {n: result(n) for n in names}
