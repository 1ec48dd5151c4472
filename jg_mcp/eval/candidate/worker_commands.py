"""What a worker process does for the harness (jg_mcp/eval/candidate/worker.py runs it): the `Worker` answers each
command (bind the harness's buffers, call a callable, run a block or a CUDA graph of its calls behind the harness's
gate, do_bench) on tensors laid over memory the harness shares with it, and reports what it did with the hints its
guard saw. It reports no times: the harness clocks every block itself (jg_mcp/eval/clock.py), and for the
candidate's role nothing the worker says is believed: the harness reads the buffers itself.
"""

from __future__ import annotations

import importlib.util
import itertools
import socket
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import Finding
from jg_mcp.eval.wire import channel
from jg_mcp.eval.wire.messages import (
    COMMAND,
    NULL_FN,
    Benched,
    Bind,
    Block,
    BlockDone,
    Bound,
    Call,
    DoBench,
    Done,
    Gates,
    Graph,
    OutputMeta,
    Queued,
    Release,
    Resume,
    Setup,
    Warm,
)
from jg_mcp.eval.wire.stream_ops import wait_value, write_value

RESUME_WAIT_S = 600
"""How long a CPU block waits for the harness's `Resume`."""
TRACEBACK_CHARS = 3000
"""The most of a traceback the worker sends (its end, where it names what failed): a message of bounded size,
more than a finding quotes (ERROR_TAIL_CHARS) so that the harness's cut decides."""


class Worker:
    """State between commands: the imported callables, the mapped bindings, the guard."""

    def __init__(self, sock: socket.socket, setup: Setup):
        import torch

        from jg_mcp.eval.candidate.guard import Guard
        from jg_mcp.eval.candidate.recorder import OpRecorder
        from jg_mcp.eval.wire.buffers import MappedBinding

        self.torch = torch
        self.mapped_binding = MappedBinding
        self.sock = sock
        self.setup = setup
        self.device = setup.device
        if self.device == "cuda":
            torch.cuda.init()
        else:
            torch.set_num_threads(1)  # the CPU stand-in: no thread pool spinning into the harness's CPU-time clock
        self.bound: dict[str, Any] = {}
        self.fns: dict[str, Any] = {}
        self.reader: Any = None
        """The command channel's reader (set by worker.main), for the `Resume` inside a CPU block."""
        self.go = self.done = 0
        """Device addresses of the harness's `go` and `done` flags (`Gates`, GPU only)."""
        self.graphs: dict[tuple[str, str, tuple[int, ...]], tuple[Any, list[Any]]] = {}
        """Captured CUDA graphs and their outputs, by callable, input binding and sets (until the binding goes)."""
        self.recorder = OpRecorder(set(setup.forbidden_ops))
        self.recorder.install()  # every thread, from the import on
        self.guard = Guard.capture(torch, {"worker_commands": sys.modules[__name__], "channel": channel})
        self.sync: Any = self.guard.watched["torch.cuda.synchronize"] if self.device == "cuda" else (lambda: None)

    def send(self, message: Any) -> None:
        channel.send(self.sock.fileno(), message.model_dump(mode="json"))

    def load(self) -> None:
        spec = importlib.util.spec_from_file_location(
            "solution" if self.setup.role == "candidate" else "goal", self.setup.module
        )
        if spec is None or spec.loader is None:
            raise ImportError(f"{self.setup.module} cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True
        try:  # the goal module stays out of the shared bytecode cache (compile_cache.bytecode_dir) candidates read
            spec.loader.exec_module(module)
        finally:
            sys.dont_write_bytecode = writes
        for label, name in self.setup.functions.items():
            fn = getattr(module, name, None)
            if not callable(fn):
                raise AttributeError(f"the module defines no callable `{name}`")
            self.fns[label] = fn

    def hints(self) -> list[Finding]:
        found = self.guard.tampering() + self.guard.new_threads() + self.guard.stream_left()
        seen, self.recorder.seen = self.recorder.seen, []  # other threads may be appending
        found += [
            Finding(reason=Reason.FORBIDDEN_CALL, detail=f"ran forbidden `aten.{op}` at run time")
            for op in dict.fromkeys(seen)
        ]
        return found

    def bind(self, cmd: Bind) -> None:
        fds: list[int] = []
        if any(b.kind == "memfd" for b in cmd.buffers):
            _, fds, _, _ = socket.recv_fds(self.sock, 1, len(cmd.buffers))
        self.bound[cmd.name] = self.mapped_binding.map(cmd, list(fds))
        self.send(Bound(name=cmd.name))

    def release(self, cmd: Release) -> None:
        self.graphs = {key: g for key, g in self.graphs.items() if key[1] not in cmd.names}
        for name in cmd.names:
            if (b := self.bound.pop(name, None)) is not None:
                b.close()
        self.send(Bound(name=",".join(cmd.names)))

    def poison(self, sizes: list[int]) -> None:
        """Hand the allocator blocks of the likely output sizes filled with 0xFF, then free them (a hint)."""
        torch = self.torch
        blocks = [torch.empty(n, dtype=torch.uint8, device=self.device).fill_(255) for n in sizes]
        self.sync()
        del blocks

    def call(self, cmd: Call) -> None:
        inputs = self.bound[cmd.inputs[0]].groups[cmd.inputs[1]]
        outputs = self.bound[cmd.outputs[0]].groups[cmd.outputs[1]]
        self.poison(cmd.poison_bytes)
        result, raised, error = None, None, None
        try:
            with self.recorder:
                result = self.fns[cmd.fn](*inputs)
                self.sync()
        except BaseException as exc:
            raised, error = how_raised(exc)
        metas = [] if raised else self.copy_out(result, inputs, outputs)
        self.send(Done(raised=raised, error=error, outputs=metas, hints=self.hints()))

    def warm(self, cmd: Warm) -> None:
        raised, error = None, None
        try:
            self.fns[cmd.fn](*self.bound[cmd.inputs[0]].groups[cmd.inputs[1]])
            self.sync()
        except BaseException as exc:
            raised, error = how_raised(exc)
        self.send(Done(raised=raised, error=error, hints=self.hints()))

    def copy_out(self, result: Any, inputs: list[Any], outputs: list[Any]) -> list[OutputMeta]:
        """Copy each returned plain tensor whose dtype and shape match into the harness's output buffer."""
        torch = self.torch
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        metas = []
        for i, out in enumerate(outs):
            if type(out) is not torch.Tensor:
                metas.append(OutputMeta(type=f"{type(out).__module__}.{type(out).__qualname__}"))
                continue
            plain = out.layout == torch.strided and not out.is_meta and out.device.type == self.device
            meta = OutputMeta(
                type="torch.Tensor",
                dtype=str(out.dtype).removeprefix("torch."),
                shape=list(out.shape),
                device=out.device.type,
                plain=plain,
                aliases_input=any(_overlap(out, t) for t in inputs),
            )
            if plain and i < len(outputs) and out.dtype == outputs[i].dtype and out.shape == outputs[i].shape:
                outputs[i].copy_(out)
                meta = meta.model_copy(update={"copied": True})
            metas.append(meta)
        self.sync()
        return metas

    def gates(self, cmd: Gates) -> None:
        flags = self.bound[cmd.binding].groups[0][0]
        self.go, self.done = flags.data_ptr(), flags.data_ptr() + 8
        self.send(Bound(name="gates"))

    def block(self, cmd: Block) -> None:
        torch = self.torch
        sets = self.bound[cmd.inputs].groups
        ring = self.bound[cmd.ring].groups if cmd.ring is not None else []
        fn = empty_outputs(torch, ring) if cmd.fn == NULL_FN else self.fns[cmd.fn]

        def calls() -> None:
            for i, s in enumerate(cmd.sets):
                out = fn(*sets[s])
                if ring:
                    copy_into(torch, ring[i % len(ring)], out)
                del out  # freed before the next call, which then gets the same memory for its output, as in do_bench

        self.gated(calls, len(cmd.sets), cmd.seq)

    def graph(self, cmd: Graph) -> None:
        torch = self.torch
        groups = self.bound[cmd.inputs].groups
        ring = self.bound[cmd.ring].groups if cmd.ring is not None else []
        fn = self.fns[cmd.fn]
        watched = self.guard.watched
        if self.device == "cuda":
            try:
                graph, outs = self.captured(cmd, fn, groups)
            except Exception as exc:
                self.send(BlockDone(error=block_failed(exc), hints=self.hints()))
                return
            replay = watched["torch.cuda.CUDAGraph.replay"]

            def replays() -> None:
                for _ in range(cmd.replays):
                    replay(graph)
                copy_all(torch, watched["torch._foreach_copy_"], ring, outs)

        else:

            def replays() -> None:
                outs: list[Any] = []
                for _ in range(cmd.replays):
                    outs = [fn(*groups[s]) for s in cmd.sets]
                copy_all(torch, watched["torch._foreach_copy_"], ring, outs)

        self.gated(replays, len(cmd.sets) * cmd.replays, cmd.seq)

    def gated(self, work: Callable[[], None], calls: int, seq: int) -> None:
        """Run `work` (a block's calls) on the GPU behind the harness's `go` flag, `done` written after it; answer
        `Queued`, then `BlockDone` once it has finished (a failure answers `BlockDone` alone)."""
        cuda = self.device == "cuda"
        try:
            begin = time.perf_counter()
            stream = self.guard.watched["torch.cuda.current_stream"]() if cuda else None
            if stream is not None:
                wait_value(stream.cuda_stream, self.go, seq)
            work()
            if stream is not None:
                write_value(stream.cuda_stream, self.done, seq)
            enqueue_ms = (time.perf_counter() - begin) * 1e3 / max(1, calls)
        except Exception as exc:
            self.send(BlockDone(error=block_failed(exc), hints=self.hints() + wrong_output(exc)))
            return
        self.send(Queued(enqueue_ms=enqueue_ms))
        if not cuda and not isinstance(COMMAND.validate_python(self.reader.recv(RESUME_WAIT_S)), Resume):
            raise ValueError("the harness sent another command where `resume` was due")
        try:
            self.sync()
        except Exception as exc:
            self.send(BlockDone(error=block_failed(exc), hints=self.hints()))
            return
        self.send(BlockDone(hints=self.hints()))

    def captured(self, cmd: Graph, fn: Callable[..., Any], groups: list[list[Any]]) -> tuple[Any, list[Any]]:
        """The graph of `cmd`'s calls and their outputs, captured on first use after a few calls on a side stream
        (as torch documents for capture)."""
        key = (cmd.fn, cmd.inputs, tuple(cmd.sets))
        if key not in self.graphs:
            torch, watched = self.torch, self.guard.watched
            current, side = watched["torch.cuda.current_stream"], watched["torch.cuda.Stream"]()
            side.wait_stream(current())
            with torch.cuda.stream(side):
                for s in list(dict.fromkeys(cmd.sets))[:3]:
                    fn(*groups[s])
            current().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with watched["torch.cuda.graph"](graph):
                outs = [fn(*groups[s]) for s in cmd.sets]
            self.graphs[key] = (graph, outs)
        return self.graphs[key]

    def do_bench(self, cmd: DoBench) -> None:
        try:
            ms = statistics.median(rotating_do_bench(self.fns[cmd.fn], self.bound[cmd.inputs].groups))
        except Exception as exc:
            self.send(Benched(error=f"{type(exc).__name__}: {exc}"[-1000:]))
            return
        self.send(Benched(median_ms=float(ms)))


def how_raised(exc: BaseException) -> tuple[str, str]:
    """How a call ended that raised (`exit` or `exception`) and what it said, for `Done`."""
    if isinstance(exc, SystemExit):
        return "exit", f"the callable called sys.exit({exc.code!r})"
    return "exception", "".join(traceback.format_exception(exc)[-6:])[-TRACEBACK_CHARS:]


def wrong_output(exc: Exception) -> list[Finding]:
    """The finding of a block that ended on a wrong output, else none."""
    return [exc.finding] if isinstance(exc, WrongOutput) else []


def block_failed(exc: Exception) -> str:
    """The error of a block or graph that raised, for `BlockDone`: its traceback's tail."""
    return "".join(traceback.format_exception(exc)[-4:])[-2000:]


class WrongOutput(Exception):
    """A timed call returned what its ring slot cannot take as it is: the block ends with this finding."""

    def __init__(self, finding: Finding):
        super().__init__(finding.detail)
        self.finding = finding


def checked_pairs(torch: Any, slot: list[Any], out: Any) -> list[tuple[Any, Any]]:
    """Each output of a timed call beside the ring tensor it goes to, once each is a plain tensor of the slot's
    dtype, shape and device: a copy would otherwise cast, broadcast or move it, and a call could write a cheaper
    output (a narrower dtype, one row broadcast) whose copy the harness then reads as if the call had made it."""
    outs = _listed(out)
    if len(outs) != len(slot):
        raise WrongOutput(Finding(reason=Reason.WRONG_SHAPE, detail=f"returned {len(outs)} outputs, not {len(slot)}"))
    for dst, o in zip(slot, outs, strict=True):
        if type(o) is not torch.Tensor or o.layout != torch.strided or o.is_meta:
            what = f"{type(o).__module__}.{type(o).__qualname__}"
            raise WrongOutput(Finding(reason=Reason.NOT_PLAIN_TENSOR, detail=f"a timed call returned a {what}"))
        if o.dtype != dst.dtype:
            raise WrongOutput(
                Finding(reason=Reason.WRONG_DTYPE, detail=f"a timed call returned {o.dtype}, expected {dst.dtype}")
            )
        if o.shape != dst.shape:
            raise WrongOutput(
                Finding(
                    reason=Reason.WRONG_SHAPE,
                    detail=f"a timed call returned shape {list(o.shape)}, expected {list(dst.shape)}",
                )
            )
        if o.device.type != dst.device.type:
            raise WrongOutput(
                Finding(reason=Reason.WRONG_DEVICE, detail=f"a timed call returned a tensor on {o.device.type}")
            )
    return list(zip(slot, outs, strict=True))


def copy_into(torch: Any, slot: list[Any], out: Any) -> None:
    """Copy a call's outputs into a ring slot, each checked first (no reference to them outlives the copy)."""
    for dst, o in checked_pairs(torch, slot, out):
        dst.copy_(o)


def copy_all(torch: Any, foreach_copy: Callable[..., Any], slots: list[list[Any]], outs: list[Any]) -> None:
    """Copy every call's outputs into its ring slot as one op (a graph's hundreds of calls: a few launches, where
    a copy per tensor put a millisecond of the harness's own work, and its jitter, on the clock around the block),
    each checked first."""
    pairs = [pair for slot, out in zip(slots, outs, strict=False) for pair in checked_pairs(torch, slot, out)]
    if pairs:
        foreach_copy([d for d, _ in pairs], [o for _, o in pairs])


def _listed(out: Any) -> Any:
    return out if isinstance(out, (tuple, list)) else [out]


def rotating_do_bench(fn: Callable[..., object], sets: list[list[Any]]) -> list[float]:
    """The per-call times of `triton.testing.do_bench` (25 ms warm-up, 100 ms of timed calls, each after an L2
    flush) of `fn`, its calls rotating over the input `sets` call by call as in the eval's blocks."""
    import triton.testing

    turn = itertools.cycle(sets)

    def call() -> object:
        return fn(*next(turn))

    return list(triton.testing.do_bench(call, warmup=25, rep=100, return_mode="all"))


def empty_outputs(torch: Any, ring: list[list[Any]]) -> Callable[..., list[Any]]:
    """The calibration callable (NULL_FN): no work, an empty tensor of each output's layout, which the block then
    copies into its ring slot as it copies a real call's outputs."""
    like = ring[0] if ring else []
    return lambda *_: [torch.empty_like(t) for t in like]


def _overlap(a: Any, b: Any) -> bool:
    """True when the two tensors' storages overlap in memory."""
    if a.device != b.device:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes() and sa.nbytes() > 0 and sb.nbytes() > 0
