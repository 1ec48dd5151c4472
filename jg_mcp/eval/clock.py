"""The harness's clock of a block: the only time that enters a speedup or a verdict
(docs/decisions/2026-12-06-time-decided-outside.md).

On the GPU, per block, the harness's own stream waits behind a gate (jg_mcp/eval/gate.py) long enough for the
worker to queue the whole block (so host launch time never shows: the GPU runs the calls back to back), writes
what must be new to the worker (a timed block's inputs) after the gate, clears the L2 (writing `cold_bytes` of its
own), records its start event and writes the block's number into a `go` flag. The worker's stream waits until `go`
holds it, runs the calls (each call's outputs copied into its ring slot) and writes it into a `done` flag; the
harness's stream waits until `done` holds it, records its end event and at once gathers a random sample of elements
from every ring slot the block wrote. A block whose `done` came early leaves poison in the slots of calls that had not
finished when the harness read them (on a probe on an H100, an early `done` let the end event fire at 9-11% of the
honest block: the GPU gives the harness's context a time slice mid-block, so ordering alone proves nothing).

On the CPU stand-in the clock is the worker process's CPU clock (every thread's, those ended included), read by the
harness from the kernel from before it sends the block until the worker says the calls have run; the guard's checks
come after.

What the clock sees besides the calls is the harness's to measure and subtract, on the baselines' process, which the
candidate cannot reach (`Calibration`): the ordering of one block (empty blocks), and the copy of one call's outputs
into the ring (blocks of a callable that does no work). The candidate's process runs nothing else per call: no
flush (the harness clears the L2 before the block), no pad (the gate hides launches), no events.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from jg_mcp.errors import JgError
from jg_mcp.eval.gate import WATCH_MS, Gate
from jg_mcp.eval.processes.process import CandidateGone, WorkerProcess
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import Finding
from jg_mcp.eval.wire.buffers import SharedBinding
from jg_mcp.eval.wire.messages import Block, BlockDone, Bound, Gates, Queued, Resume
from jg_mcp.eval.wire.ring_reads import RingSample, sample
from jg_mcp.eval.wire.stream_ops import wait_value, write_value

GATE_MIN_MS = 1.0
"""The shortest gate: a block's message and the worker's first launches."""
GATE_MAX_MS = 50.0
"""The longest gate. A callable that queues slower than this (or waits for the GPU inside its calls) runs with its
host in its time, as it would in a model."""
GATE_FACTOR = 2.0
"""The gate is this multiple of the host time the callable's last block took to queue."""
MISSES_TO_WAIT = 3
"""Blocks in a row whose gate did not hold before a callable is taken to wait for the GPU inside its calls (a longer
gate cannot help it: its host is held by the gate); its gate is then the shortest."""
FIRST_ENQUEUE_MS = 0.05
"""Host time per call assumed before a callable's first block."""
FLAGS = "flags"
"""The binding of the `go` and `done` flags."""
SAMPLES_PER_SLOT = 8
"""Elements of each output of each ring slot the harness reads when a block ends."""
CALIBRATION_BLOCKS = 3
"""Empty and no-work blocks per calibration, each; their medians count."""
LEAST_MS = 1e-6
"""The least per-call time a block is credited with (a block that took no longer than its ordering and copies)."""


@dataclass
class Clocked:
    """One block as the harness's clock saw it."""

    ms: float
    """The harness's time of the block: its events (GPU) or the worker's CPU clock (CPU)."""
    done: BlockDone
    """The worker's closing message: its hints, or the error that ended the block."""
    enqueue_ms: float = 0.0
    """The worker's host time per call to queue the block (a hint that sizes the next gate)."""
    unwritten: list[int] = field(default_factory=list)
    """Ring slots of the block that still held poison when the block ended."""
    busy_ms: float = 0.0
    """The longest time another CUDA context had the GPU while the block's gate held (jg_mcp/eval/gate.py)."""
    sample: RingSample | None = None
    """What the harness read of the block's ring slots when the block ended (the candidate's blocks)."""


@dataclass
class Calibration:
    """What the clock sees of a block besides its callable's work, measured on the baselines' process."""

    ordering_ms: float
    """Per block: the gate's release and the two orderings across processes (empty blocks)."""
    copy_ms: float
    """Per call: copying one call's outputs into its ring slot (blocks of a callable that does no work)."""

    def per_call(self, ms: float, calls: int, copies: int | None = None) -> float:
        """The callable's time per call in a block of `calls` calls that the clock timed at `ms`, `copies` of
        them (default: every call) copied into the ring."""
        copied = calls if copies is None else copies
        return max(LEAST_MS, (ms - self.ordering_ms - copied * self.copy_ms) / calls)


class BlockClock:
    """The harness's clock of one worker process's blocks (see the module's docstring)."""

    def __init__(self, proc: WorkerProcess, device: str, watch: bool = False, clear_bytes: int = 0):
        self.proc, self.device, self.watch, self.clear_bytes = proc, device, watch, clear_bytes
        self.scratch: torch.Tensor | None = None
        """What the harness writes before every block to clear the L2 (GPU; `clear_bytes`)."""
        self.enqueue: dict[str, float] = {}
        """Per callable, the host time per call its last block took to queue."""
        self.waits: dict[str, bool] = {}
        """Per callable, whether its host waits for the GPU inside its calls: its gate did not hold in
        MISSES_TO_WAIT blocks in a row, each gate sized by the queueing of the block before."""
        self.missed: dict[str, int] = {}
        """Per callable, its blocks in a row whose gate did not hold."""
        self.stream: Any = None
        self.flags: SharedBinding | None = None
        self.go = self.done = 0
        """Device addresses of the `go` and `done` flags."""
        self.seq = 0
        """The last block's value of the flags."""
        self.gate: Gate | None = None
        self.busiest_ms = 0.0
        """The longest `Clocked.busy_ms` since it was last reset."""

    def open(self) -> None:
        """Share the `go` and `done` flags with the worker (GPU; nothing on the CPU)."""
        if self.device != "cuda":
            return
        self.stream = torch.cuda.Stream()
        with torch.cuda.stream(self.stream):
            self.gate = Gate()
            if self.clear_bytes:
                self.scratch = torch.empty(self.clear_bytes, dtype=torch.uint8, device="cuda")
        self.flags = SharedBinding(FLAGS, "cuda")
        self.flags.add_copy([torch.zeros(2, dtype=torch.int64, device="cuda")])
        torch.cuda.synchronize()
        self.proc.bind(self.flags)
        self.proc.send(Gates(binding=FLAGS))
        self.proc.expect(Bound)
        flags = self.flags.groups[0][0]
        self.go, self.done = flags.data_ptr(), flags.data_ptr() + 8

    def close(self) -> None:
        """Free the flags (the worker's process is gone or done with them)."""
        if self.flags is not None:
            self.flags.free()
            self.flags = None
        self.scratch = None

    def gate_ms(self, fn: str, calls: int) -> float:
        """How long the gate holds: long enough for the callable's last block's queueing of `calls` calls, and on a
        watched clock (the baselines') at least WATCH_MS, so that the gate sees any other context with work."""
        least = WATCH_MS if self.watch else GATE_MIN_MS
        if self.waits.get(fn):
            return least
        return max(least, min(GATE_MAX_MS, GATE_MIN_MS + GATE_FACTOR * self.enqueue.get(fn, FIRST_ENQUEUE_MS) * calls))

    def run(
        self,
        message: Any,
        calls: int,
        ring: SharedBinding | None = None,
        slots: int = 0,
        before_go: Callable[[], None] | None = None,
        watched: bool = True,
    ) -> Clocked:
        """Send one block (a Block or Graph of `calls` calls) and clock it; with `ring`, read a sample of its first
        `slots` slots when it ends. `before_go` writes what the worker must not see before the block starts. A block
        not `watched` (one whose worker runs calls before `go` on purpose) leaves `busiest_ms` as it was."""
        if self.device == "cuda":
            return self._gpu(message, calls, ring, slots, before_go, watched)
        return self._cpu(message, ring, slots, before_go)

    def _first(self) -> Queued | BlockDone:
        reply = self.proc.recv()
        if not isinstance(reply, (Queued, BlockDone)):
            self.proc.kill()
            raise CandidateGone(
                Finding(reason=Reason.TAMPERED, detail=f"result channel: `{reply.event}` where `queued` was due")
            )
        return reply

    def _cpu(
        self, message: Any, ring: SharedBinding | None, slots: int, before_go: Callable[[], None] | None
    ) -> Clocked:
        start = self.proc.settled_cpu_ms()
        if before_go is not None:
            before_go()
        self.proc.send(message)
        first = self._first()
        if isinstance(first, BlockDone):
            return Clocked(ms=self.proc.settled_cpu_ms() - start, done=first)
        ms = self.proc.settled_cpu_ms() - start
        self.enqueue[message.fn] = first.enqueue_ms
        read = sample(ring, slots, SAMPLES_PER_SLOT) if ring is not None and slots else None
        unwritten = poisoned_slots(read.unwritten()) if read is not None else []
        self.proc.send(Resume())
        done = self.proc.expect(BlockDone)
        return Clocked(ms=ms, done=done, enqueue_ms=first.enqueue_ms, unwritten=unwritten, sample=read)

    def _gpu(
        self,
        message: Any,
        calls: int,
        ring: SharedBinding | None,
        slots: int,
        before_go: Callable[[], None] | None,
        watched: bool,
    ) -> Clocked:
        fn = message.fn
        gate = self.gate_ms(fn, calls)
        self.seq += 1
        message = message.model_copy(update={"seq": self.seq})
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()  # the harness's writes (inputs, poison) are done before the gate
        assert self.gate is not None
        with torch.cuda.stream(self.stream):
            self.gate.hold(gate)
            if before_go is not None:
                before_go()
            if self.scratch is not None:
                self.scratch.zero_()
            start.record()
            write_value(self.stream.cuda_stream, self.go, self.seq)
        self.proc.send(message)
        first = self._first()
        held = not start.query()
        if isinstance(first, BlockDone):
            self.stream.synchronize()
            return Clocked(ms=0.0, done=first, busy_ms=self.busy(watched))
        with torch.cuda.stream(self.stream):
            wait_value(self.stream.cuda_stream, self.done, self.seq)
            end.record()
            read = sample(ring, slots, SAMPLES_PER_SLOT) if ring is not None and slots else None
        self.stream.synchronize()
        done = self.proc.expect(BlockDone)
        self.missed[fn] = 0 if held else self.missed.get(fn, 0) + 1
        self.waits[fn] = self.waits.get(fn, False) or self.missed[fn] >= MISSES_TO_WAIT
        self.enqueue[fn] = first.enqueue_ms
        unwritten = poisoned_slots(read.unwritten()) if read is not None else []
        return Clocked(start.elapsed_time(end), done, first.enqueue_ms, unwritten, self.busy(watched), read)

    def busy(self, watched: bool) -> float:
        assert self.gate is not None
        busy = self.gate.gap_ms()
        if watched:
            self.busiest_ms = max(self.busiest_ms, busy)
        return busy


def poisoned_slots(flags: torch.Tensor) -> list[int]:
    return [int(i) for i in torch.nonzero(flags.cpu()).flatten().tolist()]


def calibrate(clock: BlockClock, fn_null: str, inputs: str, sets: list[int], ring: SharedBinding) -> Calibration:
    """Measure the ordering of a block and the copy of a call's outputs on a (trusted) baseline process: empty
    blocks, then blocks of `sets` calls of the no-work callable into `ring`."""

    def median_ms(message: Block, calls: int) -> float:
        times = []
        for _ in range(CALIBRATION_BLOCKS):
            ran = clock.run(message, calls)
            if ran.done.error is not None:
                raise JgError(f"the baseline process failed a calibration block: {ran.done.error}")
            times.append(ran.ms)
        return statistics.median(times)

    ordering = median_ms(Block(fn=fn_null, inputs=inputs, sets=[], ring=None), 0)
    copying = median_ms(Block(fn=fn_null, inputs=inputs, sets=sets, ring=ring.name), len(sets))
    return Calibration(ordering_ms=ordering, copy_ms=max(0.0, (copying - ordering) / max(1, len(sets))))
