"""Timing: the candidate in its process and the baselines in theirs take turns in blocks of back-to-back calls, each
block clocked by the harness itself (jg_mcp/eval/clock.py), and the harness reads back outputs at random.

What a time means: the device time of one call on inputs no callable has seen and that are not in the L2 (once a timed
block's gate has passed, the harness writes new inputs into the sets its calls read, one set per call, and then clears
the L2 on its own stream, as do_bench's flush before every call leaves it; nothing runs in the candidate's process for
it to skip), where `lead_ms` asks for it after a lead block of the same calls whose times are not used (none by
default: on an H100 they bought no agreement with do_bench), with its launches hidden (the GPU is held behind the
harness's gate until the whole block is queued), by the harness's own CUDA events around the block, ordered against
the worker's stream by flags in shared memory, less what the harness measures on the baselines' process for the
ordering of a block and for copying a call's outputs into its ring slot, divided by the block's calls. On the CPU
stand-in the harness's clock is the worker process's CPU clock. Each call's outputs are copied into the harness's
ring, a slot per call, poisoned before the block; when the block ends the harness reads a sample of every slot at once
(an early `done` leaves poison there), compares each call's sample, once the round's baselines have run on the same
inputs, with theirs (a call far from them is judged there against the reference; for a candidate's calls past the
baselines' count a baseline runs an untimed block on their inputs), and judges a call of its choosing.
A shape whose fastest callable takes under `graph_below_ms` per call is timed under CUDA graphs too, and its speedups
are the graphs' (jg_mcp/eval/graphs.py; every check here runs there first). Blocks take turns A B, then B A, so
drift between blocks cancels; each call's output is freed before the next call, as under do_bench.

No timed call can use a result computed before it: its inputs are new. A callable that keeps results anyway shows
on blocks rerun on inputs it has seen (`seen`): faster there than on new inputs, beyond what the baselines show, is
CACHED_OUTPUT. The candidate's process and the baselines' each map copies of their own (inputs, ring): the
candidate cannot write what a baseline reads while it is timed, and its whole process tree is stopped (SIGSTOP,
from the harness) while a baseline is timed, so none of its code runs beside the baselines' calls; the harness's
gate before every baseline block sees any GPU work of the candidate's that outlived its block.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import threading
import time
from typing import TYPE_CHECKING

import torch

from jg_mcp.errors import JgError
from jg_mcp.eval.bench import Bench, walled
from jg_mcp.eval.checks import call_findings
from jg_mcp.eval.clocks import ClockSampler, device_sampler
from jg_mcp.eval.graphs import time_under_graphs
from jg_mcp.eval.input_sets import InputSets
from jg_mcp.eval.memory import plan_shape, unfit
from jg_mcp.eval.options import TimingParams
from jg_mcp.eval.processes.process import CandidateGone, WorkerProcess
from jg_mcp.eval.report import EvalReport, ShapeResult
from jg_mcp.eval.report_timing import Timing, TimingMethod
from jg_mcp.eval.scoring import bandwidth_of, floor_ms, seen_inputs_gain
from jg_mcp.eval.sizing import block_sizes, lead_sizes, rotation, summarize
from jg_mcp.eval.timing_checks import check_inputs, sampled_check, seen_pass, spot_check, written
from jg_mcp.eval.turns import BASELINE, CANDIDATE, SIDES, Ran, Turns
from jg_mcp.eval.wire.buffers import OutOfDeviceMemory, SharedBinding
from jg_mcp.eval.wire.messages import Done, Release, Warm
from jg_mcp.goals import SEED_BITS

if TYPE_CHECKING:
    from jg_mcp.eval.harness import Evaluation
    from jg_mcp.eval.shapes import Case


CLOCKS = {
    "cuda": "the harness's CUDA events around each block, ordered against the worker's stream by flags in IPC memory",
    "cpu": "the worker process's CPU clock, read by the harness around each block",
}
"""Which clock timed a shape's blocks, by device (`ShapeResult.clock`)."""


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
        self.turns = Turns(ev, candidate, baseline, self.p.cold_bytes)
        self.sampler: ClockSampler | None = None
        """NVML's sampler of the shape being timed (GPU only); the timed blocks label its samples."""
        self.thread: threading.Thread | None = None
        self.ready = False
        self.failure: BaseException | None = None
        self.prepare_s = 0.0
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
                self.turns.open()
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
                self.turns.worker(name).send(Warm(fn=name, inputs=("warm", 0)))
            for name in self.names:
                done = self.turns.worker(name).expect(Done)
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
            self.turns.close()

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
                            proc.send(Release(names=["tin", "ring", "gin", "gring"]))
                            proc.recv()
                shape.wall_s["time"] = time.monotonic() - mark
                shape.clocks = sampler.summary() if sampler else None
        except CandidateGone as gone:
            report.add(gone.finding)

    def lead_block(self, report: EvalReport, b: Bench, name: str, sets: list[int]) -> Ran:
        """A block whose times go unused (warm-up, estimate, lead): the candidate's into a freshly poisoned ring,
        one of its calls judged as often as a timed block's, so work skipped there shows as it does in a timed one."""
        if name == CANDIDATE:
            b.ring.poison()
        ran = self.turns.block(name, sets, "tin", b.ring)
        if name == CANDIDATE and self.pick.random() < self.p.spot_check_p:
            spot_check(self.pick, self.ev.tol, report, b.case, b.shape, b.ring, b.own, sets)
        return ran

    def time_case(self, report: EvalReport, case: Case, shape: ShapeResult) -> None:
        p, ev = self.p, self.ev
        seeds = [ev.rng.randrange(2**SEED_BITS)]
        first = ev.reference(case.dims, seeds[0])
        like = ev.output_like(first[1])
        goal, hw = ev.goal, ev.goal.goal.hardware
        floor = floor_ms(
            goal.flops(case.dims), goal.bytes(case.dims), hw.peak_tflops, bandwidth_of(goal, report.environment.gpu)[0]
        )
        shape.memory = plan = plan_shape(ev.device, first, like, shape.check_peak_bytes, p, floor)
        if not plan.fits:
            shape.timing_skipped = unfit(plan)
            report.notes.append(f"{case.name}: {shape.timing_skipped}")
            return
        seeds += [ev.rng.randrange(2**SEED_BITS) for _ in range(plan.input_sets - 1)]
        made = [first[0], *(ev.make_inputs(case.dims, seed) for seed in seeds[1:])]
        slots = plan.ring_slots
        b = Bench.empty(case, shape, like, ev.device)
        try:
            for side in SIDES:
                b.ins[side] = InputSets(ev.expected, b.sides[side]["tin"], made)
                b.sides[side]["ring"].add_ring(like, slots)
            b.own.done[0] = first[1]
            del made, first
            for side, proc in ((CANDIDATE, self.cand), (BASELINE, self.base)):
                proc.bind(b.sides[side]["tin"])
                proc.bind(b.sides[side]["ring"])
            cal = self.turns.calibrate(
                rotation(min(slots, p.max_block), len(b.ins[BASELINE])), b.sides[BASELINE]["ring"]
            )
            shape.clock = CLOCKS[ev.device]
            shape.ordering_ms, shape.copy_ms = cal.ordering_ms, cal.copy_ms

            def measure(careful: bool) -> dict[str, Timing]:
                """The shape's timed rounds, then its blocks on seen inputs (each after a lead block when `careful`)."""
                results, last = self.rounds(report, b, slots)
                before = shape.wall_s.get("time_seen", 0.0)
                with walled(shape, "time_seen"):
                    seen_pass(self, report, b, results, last, lead=careful)
                spent = shape.wall_s["time_seen"] - before  # the eval's phase sums every shape's part
                report.phases["timing_seen"] = report.phases.get("timing_seen", 0.0) + spent
                return results

            results = measure(careful=False)
            if suspicion := self.suspicion(results):
                shape.retimed = suspicion
                results = measure(careful=True)
            with walled(shape, "time_graphs"):
                time_under_graphs(self, report, b, results)
            shape.input_seeds = seeds
            shape.gate_busy_ms = self.turns.clocks[BASELINE].busiest_ms if ev.device == "cuda" else None
            shape.candidate = results.pop(CANDIDATE)
            shape.baselines = results
            for side, proc in ((CANDIDATE, self.cand), (BASELINE, self.base)):
                proc.send(Release(names=list(b.sides[side])))
                proc.recv()
        finally:
            b.free()

    def suspicion(self, results: dict[str, Timing]) -> str | None:
        """What the timing finding would say of these results (speed on seen inputs), else None: such a finding is
        reported only when a second timing of the shape (every block on seen inputs after a lead block) shows it
        too. Host noise or a power-capped clock can make one measurement look like it; a callable that keeps
        results shows it every time."""
        cand = results[CANDIDATE]
        bases = {n: r for n, r in results.items() if n != CANDIDATE}
        return seen_inputs_gain(cand, bases, self.p.seen_slack)

    def estimate(self, report: EvalReport, b: Bench, n_sets: int) -> dict[str, float]:
        """Warm each callable up and measure its time per call by a block over the input sets once."""
        device: dict[str, float] = {}
        for name in self.names[1:] + self.names[:1]:
            if self.p.warmup:
                self.lead_block(report, b, name, rotation(self.p.warmup * n_sets, n_sets))
            device[name] = self.lead_block(report, b, name, list(range(n_sets))).per_call_ms
        return device

    def cover(self, b: Bench, name: str, made: list[list[torch.Tensor]], first: int, count: int) -> None:
        """A block of baseline `name` (its time unused) on the round's sets `first` to `first + count`, renewed with
        `made` after its gate as the timed blocks' were: a candidate faster than the baselines has more calls per
        block than they do, and its calls past theirs would have no baseline output to be compared with
        (`sampled_check`). The candidate stays stopped; its ring and inputs are untouched."""
        sets = list(range(first, first + count))
        self.turns.block(name, sets, "tin", b.ring, b.ins[BASELINE].renewal(sets, made[first : first + count]))

    def new_inputs(self, b: Bench, count: int) -> list[list[torch.Tensor]]:
        """`count` input sets none has seen, from one new secret seed (set i from that seed + i), which the report
        publishes (`renewed_seeds`)."""
        seed = self.ev.rng.randrange(2**SEED_BITS)
        b.shape.renewed_seeds.append(seed)
        return [self.ev.make_inputs(b.case.dims, (seed + i) % 2**SEED_BITS) for i in range(count)]

    def rounds(self, report: EvalReport, b: Bench, slots: int) -> tuple[dict[str, Timing], dict[str, list[int]]]:
        """The timed rounds, and each callable's last timed block's sets."""
        p, names, case, shape = self.p, self.names, b.case, b.shape
        own, ring = b.own, b.ring  # the harness reads back the candidate's inputs and ring
        n_sets = len(own)
        with walled(shape, "time_estimate"):
            estimates = self.estimate(report, b, n_sets)
        per_block = block_sizes(estimates, p.block_ms, min(p.max_block, slots, n_sets))
        lead = lead_sizes(estimates, p.lead_ms, p.max_lead)
        times: dict[str, list[float]] = {n: [] for n in names}
        calls: dict[str, int] = dict.fromkeys(names, 0)
        queued, rounds, checked, begin = dict.fromkeys(names, 0), 0, 0, time.monotonic()
        sampled = len(self.sampler.samples) if self.sampler else 0  # a second timing's clocks are its own

        def lead_sets(name: str, count: int) -> list[int]:
            """The callable's next `count` lead calls, rotating over the input sets where its last lead left off."""
            first, queued[name] = queued[name], queued[name] + count
            return rotation(count, n_sets, first)

        def run(name: str, made: list[list[torch.Tensor]]) -> tuple[Ran, list[int]]:
            """A lead block of `name` (its times unused, on the sets as they are), then a timed block whose sets
            the harness renews with `made` after its gate, one set per call; a candidate's each into a freshly
            poisoned ring, its inputs read back after them."""
            with walled(shape, "time_lead"):
                hints = self.lead_block(report, b, name, lead_sets(name, lead[name])).hints if lead[name] else []
            side = CANDIDATE if name == CANDIDATE else BASELINE
            if name == CANDIDATE:
                ring.poison()
            sets = list(range(per_block[name]))
            if self.sampler:
                self.sampler.owner = name
            try:
                with walled(shape, "time_blocks"):
                    ran = self.turns.block(name, sets, "tin", ring, b.ins[side].renewal(sets, made[: len(sets)]))
            finally:
                if self.sampler:
                    self.sampler.owner = None
            if name == CANDIDATE:
                check_inputs(report, case, shape, hints + ran.hints, own.intact())
            return ran, sets

        last: dict[str, list[int]] = {}
        while True:
            with walled(shape, "time_inputs"):
                made = self.new_inputs(b, max(per_block.values()))  # the round's: every callable reads them
            samples, order = {}, names if rounds % 2 == 0 else names[::-1]
            for name in order:
                ran, last[name] = run(name, made)
                times[name].append(ran.per_call_ms)
                calls[name] += len(last[name])
                samples[name] = ran.sample
                if name == CANDIDATE and self.pick.random() < p.spot_check_p:
                    checked += spot_check(self.pick, self.ev.tol, report, case, shape, ring, own, last[name])
            # the baselines' ring now holds their outputs of the round's inputs too
            theirs, compared = b.sides[BASELINE]["ring"], written(order, per_block, lead)
            sampled_check(self.ev.tol, report, b, samples[CANDIDATE], theirs, compared, last[CANDIDATE])
            if (past := len(last[CANDIDATE]) - compared) > 0:
                with walled(shape, "time_cover"):
                    self.cover(b, min(names[1:], key=estimates.__getitem__), made, compared, past)
                sampled_check(self.ev.tol, report, b, samples[CANDIDATE], theirs, past, last[CANDIDATE], first=compared)
            rounds += 1
            if rounds < p.min_rounds or min(calls.values()) < p.min_reps:
                continue
            worst = max(summarize(times[n])["rel_se_median"] for n in names)
            full = max(calls.values()) >= p.max_reps
            if worst < p.target_rel_se or time.monotonic() - begin > p.budget_s or full:
                break
        while checked < p.spot_checks:
            made = self.new_inputs(b, per_block[CANDIDATE])
            checked += spot_check(self.pick, self.ev.tol, report, case, shape, ring, own, run(CANDIDATE, made)[1])

        def result(n: str) -> Timing:
            spread = summarize(times[n])
            clock = self.turns.clocks[CANDIDATE if n == CANDIDATE else BASELINE]
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

        return {n: result(n) for n in names}, last
