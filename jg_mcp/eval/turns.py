"""The two timing processes taking turns at blocks: the candidate's and the baselines'. One block is sent, clocked
by the harness (jg_mcp/eval/clock.py) and ruled on here: the candidate's process tree is stopped while a baseline
runs; a candidate block whose ring still holds poison when the clock stopped, or another context's work seen
during a gate, ends timing (`timing_escape`); a failed block ends timing with its reason. Per-call timing
(jg_mcp/eval/timing.py) and graph timing (jg_mcp/eval/graphs.py) both send their blocks through `Turns`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jg_mcp.errors import JgError
from jg_mcp.eval.clock import BlockClock, Calibration, Clocked, calibrate
from jg_mcp.eval.gate import BUSY_GAP_MS
from jg_mcp.eval.processes.process import CandidateGone, WorkerProcess
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import Finding
from jg_mcp.eval.wire.buffers import SharedBinding
from jg_mcp.eval.wire.messages import NULL_FN, Block, Graph
from jg_mcp.eval.wire.ring_reads import RingSample

if TYPE_CHECKING:
    from jg_mcp.eval.harness import Evaluation

CANDIDATE, BASELINE = "candidate", "baseline"
SIDES = (CANDIDATE, BASELINE)
"""Each process gets bindings of its own (inputs, output ring), each a copy the harness made: the baselines'
process never maps memory the candidate's process can write, so the candidate cannot change what a baseline reads
while it is timed (the harness reads back only the candidate's inputs after its blocks)."""
ENDS_A_BLOCK = frozenset(
    {Reason.FORBIDDEN_CALL, Reason.NOT_PLAIN_TENSOR, Reason.WRONG_DTYPE, Reason.WRONG_SHAPE, Reason.WRONG_DEVICE}
)
"""Why a candidate's block can end, named by the worker: a library op refused there, or an output its ring slot
cannot take as it is."""


@dataclass
class Ran:
    """One block as the harness's clock saw it."""

    per_call_ms: float
    """The harness's time of the block, less the calibrated ordering and copies, divided by its calls."""
    ms: float
    """The harness's time of the whole block."""
    hints: list[Finding]
    sample: RingSample | None = None
    """What the harness read of the candidate's ring slots when the block ended (`Clocked.sample`)."""


class Turns:
    """The candidate's timing process and the baselines' process, each with the harness's clock of its blocks."""

    def __init__(self, ev: Evaluation, candidate: WorkerProcess, baseline: WorkerProcess, clear_bytes: int):
        self.ev, self.cand, self.base = ev, candidate, baseline
        self.clocks = {
            CANDIDATE: BlockClock(candidate, ev.device, clear_bytes=clear_bytes),
            BASELINE: BlockClock(baseline, ev.device, watch=True, clear_bytes=clear_bytes),
        }
        self.cal = Calibration(ordering_ms=0.0, copy_ms=0.0)
        """The shape being timed's calibration (`calibrate`, on the baselines' process)."""

    def worker(self, name: str) -> WorkerProcess:
        return self.cand if name == CANDIDATE else self.base

    def open(self) -> None:
        self.clocks[BASELINE].open()
        self.clocks[CANDIDATE].open()

    def close(self) -> None:
        for clock in self.clocks.values():
            clock.close()

    def calibrate(self, sets: list[int], ring: SharedBinding) -> Calibration:
        """The shape's calibration on the baselines' process (`clock.calibrate`), the candidate stopped; another
        context's work seen during its gates, twice, ends timing (`not_busy`)."""
        self.cand.freeze()
        clock = self.clocks[BASELINE]
        clock.busiest_ms = 0.0  # the shape's own
        self.cal = calibrate(clock, NULL_FN, "tin", sets, ring)
        if clock.busiest_ms > BUSY_GAP_MS:
            clock.busiest_ms = 0.0
            self.cal = calibrate(clock, NULL_FN, "tin", sets, ring)
            self.not_busy(BASELINE, clock.busiest_ms)
        return self.cal

    def block(
        self, name: str, sets: list[int], inputs: str, ring: SharedBinding, before_go: Callable[[], None] | None = None
    ) -> Ran:
        """One block, its outputs into the callable's ring (the harness reads `ring`, the candidate's, after the
        candidate's blocks). Every block has the one form (warm-up, estimate, lead, timed, seen): the candidate
        cannot tell which of its blocks count."""
        message = Block(fn=name, inputs=inputs, sets=sets, ring="ring")
        clocked = self.exchange(name, message, len(sets), ring if name == CANDIDATE else None, before_go)
        return self.ran(name, clocked, self.cal.per_call(clocked.ms, len(sets)))

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
        if name != CANDIDATE:
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
            if name != CANDIDATE:
                raise JgError(f"baseline {name} failed while timed: {done.error}")
            refused = [h for h in done.hints if h.reason in ENDS_A_BLOCK]
            if refused:
                raise CandidateGone(refused[0].model_copy(update={"detail": f"while timed: {refused[0].detail}"}))
            raise CandidateGone(Finding(reason=Reason.EXCEPTION, detail=f"while timed: {done.error[-1500:]}"))
        return Ran(per_call_ms, clocked.ms, list(done.hints), clocked.sample)
