"""The candidate process: a fresh interpreter that imports the solution and calls it as the harness says.

Run as `python -m jg_mcp.eval.child RESULT_FD COMMAND_FD HARNESS_PID`. Everything the measurement relies on (torch,
the timer, the goal's reference and input maker, the forbidden-call wrappers, the guard) is set up and
captured before the candidate is imported. The process only reports facts (output bytes and metadata,
input hashes, times, what the guard saw); the verdict is made in the harness process, which computes its
own reference from the secret seed and never runs candidate code.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import signal
import sys
import time
import traceback
from typing import Any

from jg_mcp.eval import channel
from jg_mcp.eval.guard import FileWatch, Guard
from jg_mcp.eval.policy import CallRecorder, harness_call, install_wrappers
from jg_mcp.eval.report import Finding, Reason
from jg_mcp.goals import LoadedGoal, load_goal

_write = os.write
_sha256 = hashlib.sha256


class LaunchCounter:
    """Counts Triton kernel launches (compiled or interpreted) and CUDA graph replays: a repeat call that launches
    none did no work (a solution that launches only through other paths is not judged by this count)."""

    def __init__(self) -> None:
        self.n = 0

    def install(self) -> None:
        import torch
        import triton.runtime.interpreter as interp
        from triton.runtime import jit

        for owner in (jit.JITFunction, interp.InterpretedFunction):
            self._wrap(owner, "run")
        self._wrap(torch.cuda.CUDAGraph, "replay")

    def _wrap(self, owner: type, name: str) -> None:
        original = getattr(owner, name)
        counter = self

        def launch(fn_self: Any, *args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("warmup", False):
                counter.n += 1
            return original(fn_self, *args, **kwargs)

        setattr(owner, name, launch)


class Child:
    """State of the candidate process between commands."""

    def __init__(self, result_fd: int, setup: dict[str, Any]):
        import torch

        self.torch = torch
        self.fd = result_fd
        self.device = setup["device"]
        self.goal: LoadedGoal = load_goal(setup["goal"])
        self.recorder: CallRecorder = install_wrappers(self.goal.goal.forbidden)
        self.launches = LaunchCounter()
        self.launches.install()
        modules = {"child": sys.modules[__name__], "goal": self.goal.module, "channel": channel}
        self.guard = Guard.capture(torch, modules)
        self.files = FileWatch(setup["watch"])
        self.files.install()
        self.fn: Any = None

    def send(self, header: dict[str, Any], blobs: list[Any] = ()) -> None:
        channel.send(self.fd, header, list(blobs), write=_write)

    def load(self, path: str, function: str) -> None:
        spec = importlib.util.spec_from_file_location("solution", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["solution"] = module
        spec.loader.exec_module(module)
        fn = getattr(module, function, None)
        if not callable(fn):
            raise AttributeError(f"the solution defines no callable `{function}`")
        self.fn = fn

    def inputs(self, dims: dict[str, int], seed: int) -> tuple:
        return harness_call(self.recorder, self.goal.make_inputs, dims, seed, self.device)

    def sync(self) -> None:
        if self.device == "cuda":
            self.guard.watched["torch.cuda.synchronize"]()

    def poison(self, dims_numel: list[int]) -> None:
        """Hand the allocator blocks of the likely output sizes filled with 0xFF, then free them."""
        torch = self.torch
        if self.device == "cuda":
            torch.cuda.empty_cache()
        blocks = [
            torch.empty(n * w, dtype=torch.uint8, device=self.device).fill_(255)
            for n in dims_numel
            for w in (1, 2, 4, 8)
        ]
        self.sync()
        del blocks

    def findings_after_call(self) -> list[Finding]:
        found = self.guard.tampering() + self.guard.new_threads() + self.guard.stream_left() + self.files.new_writes()
        for name in dict.fromkeys(self.recorder.calls):
            found.append(Finding(reason=Reason.FORBIDDEN_CALL, detail=f"called forbidden `{name}` at run time"))
        self.recorder.calls.clear()
        return found

    def call(self, inputs: tuple) -> tuple[Any, list[Finding], str | None, int]:
        """Call the candidate; returns (result, findings, error text, Triton launches)."""
        before = self.launches.n
        result, error, found = None, None, []
        try:
            result = self.fn(*inputs)
            self.sync()
        except SystemExit as exc:
            found.append(Finding(reason=Reason.EARLY_EXIT, detail=f"the kernel called sys.exit({exc.code!r})"))
            error = "SystemExit"
        except BaseException as exc:
            error = "".join(traceback.format_exception(exc)[-6:])[-3000:]
        return result, found + self.findings_after_call(), error, self.launches.n - before

    def describe(self, result: Any, inputs: tuple, earlier: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
        """Metadata of each output, and the bytes of each plain tensor output."""
        torch = self.torch
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        descs, blobs = [], []
        for out in outs:
            if type(out) is not torch.Tensor:
                descs.append({"plain": False, "type": f"{type(out).__module__}.{type(out).__qualname__}"})
                continue
            d: dict[str, Any] = {
                "plain": out.layout == torch.strided and not out.is_meta and _dense(out),
                "type": "torch.Tensor",
                "layout": str(out.layout),
                "device": out.device.type,
                "dtype": str(out.dtype).removeprefix("torch."),
                "shape": list(out.shape),
                "aliases_input": any(_overlap(out, t) for t in inputs if isinstance(t, torch.Tensor)),
                "shares_earlier": any(_overlap(out, t) for t in earlier if isinstance(t, torch.Tensor)),
            }
            descs.append(d)
            if d["plain"] and not d["aliases_input"]:
                flat = out.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy()
                d["blob"] = len(blobs)
                blobs.append(memoryview(flat))
        return descs, blobs

    def input_hashes(self, inputs: tuple) -> list[str | None]:
        torch = self.torch
        return [
            _sha256(t.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy()).hexdigest()
            if isinstance(t, torch.Tensor)
            else None
            for t in inputs
        ]

    def report_call(self, label: str, inputs: tuple, earlier: list[Any], numel: list[int]) -> Any:
        self.poison(numel)
        result, found, error, launches = self.call(inputs)
        self.report_result(label, result, inputs, earlier, found, error, launches)
        return None if error else result

    def report_result(
        self, label: str, result: Any, inputs: tuple, earlier: list[Any], found: list[Finding], error: str | None,
        launches: int | None, **extra: Any,
    ) -> None:
        header: dict[str, Any] = {"event": "call", "label": label, "findings": [f.model_dump() for f in found]}
        header |= {"error": error, "launches": launches} | extra
        blobs: list[Any] = []
        if error is None:
            header["outputs"], blobs = self.describe(result, inputs, earlier)
            header["input_sha"] = self.input_hashes(inputs)
        self.send(header, blobs)

    def check(self, cmd: dict[str, Any]) -> None:
        """One trial: candidate, reference (output scrubbed), candidate; then, if asked, new inputs, same buffers."""
        numel = cmd["numel"]
        inputs = self.inputs(cmd["dims"], cmd["seed"])
        first = self.report_call("c1", inputs, [], numel)
        if first is not None:
            ref = harness_call(self.recorder, self.goal.reference, *inputs)
            _scrub(self.torch, ref)
            del ref
            self.guard.absorb_threads()
            second = self.report_call("c2", inputs, [first], numel)
            if second is not None and cmd.get("refill_seed") is not None:
                fresh = self.inputs(cmd["dims"], cmd["refill_seed"])
                for old, new in zip(inputs, fresh):
                    if isinstance(old, self.torch.Tensor):
                        old.copy_(new)
                self.report_call("c3", inputs, [first, second], numel)
        self.send({"event": "end"})

    def time(self, cmd: dict[str, Any]) -> None:
        """Time the candidate with the baselines; send the outputs of the timed calls picked for spot checks,
        then verify one more output on input set 0."""
        from jg_mcp.eval.timing import measure

        sets = [self.inputs(cmd["dims"], s) for s in cmd["seeds"]]
        callables = {"candidate": self.fn} | {n: self.goal.baseline(n) for n in cmd["baselines"]}
        seeds = cmd.get("fresh_seeds") or []
        fresh = (lambda i: self.inputs(cmd["dims"], seeds[i])) if seeds else None
        kept: list[tuple[int, Any]] = []
        results = measure(self, callables, sets, cmd["params"] | {"fresh": len(seeds)}, fresh, kept)
        self.send(
            {"event": "timing", "results": results, "findings": [f.model_dump() for f in self.findings_after_call()]}
        )
        self.report_spots(kept, sets)
        kept.clear()
        self.report_call("verify", sets[0], [], cmd["numel"])
        self.send({"event": "end"})


    def report_spots(self, kept: list[tuple[int, Any]], sets: list[tuple]) -> None:
        """Send each kept output of a timed call with the index of the input set it was computed from."""
        for n, (i, out) in enumerate(kept):
            self.report_result(f"spot_{n}", out, sets[i], [], [], None, None, set=i)


def _overlap(a: Any, b: Any) -> bool:
    """True when the two tensors' storages overlap in memory."""
    if a.device != b.device:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes() and sa.nbytes() > 0 and sb.nbytes() > 0


def _dense(t: Any) -> bool:
    """Non-overlapping and dense: some permutation of the dimensions makes the strides contiguous."""
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride()), key=lambda p: p[1]):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _scrub(torch: Any, result: Any) -> None:
    """Overwrite a harness result's storage with 0xFF before freeing it, so no one can reuse its values."""
    for t in result if isinstance(result, (tuple, list)) else [result]:
        torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage()).fill_(255)


def die_with(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent (the harness) dies; exit now if it already has."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def watch_group() -> None:
    """Fork a watchdog that, once this process is gone (killed with the harness, say), kills what is left of
    its process group: the processes the candidate started, which PR_SET_PDEATHSIG does not reach. It holds
    none of the pipes, so a dead candidate process still reads as dead at once."""
    me = os.getpid()
    if os.fork() != 0:
        return
    try:
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        while os.getppid() == me:
            time.sleep(0.5)
        os.killpg(os.getpgid(0), signal.SIGKILL)
    finally:
        os._exit(0)


def main(argv: list[str]) -> int:
    result_fd, command_fd = int(argv[1]), int(argv[2])
    die_with(int(argv[3]))
    watch_group()
    reader = channel.Reader(command_fd)
    setup, _ = reader.recv(600)
    try:
        child = Child(result_fd, setup)
    except Exception as exc:
        channel.send(result_fd, {"event": "harness_error", "error": f"{type(exc).__name__}: {exc}"})
        return 1
    try:
        child.load(setup["solution"], setup["function"])
    except SystemExit as exc:
        child.send({"event": "import_error", "reason": Reason.EARLY_EXIT, "error": f"sys.exit({exc.code!r}) at import"})
        return 0
    except BaseException as exc:
        child.send(
            {
                "event": "import_error",
                "reason": Reason.IMPORT_ERROR,
                "error": "".join(traceback.format_exception(exc)[-6:]),
            }
        )
        return 0
    child.send({"event": "ready", "findings": [f.model_dump() for f in child.findings_after_call()]})
    while True:
        cmd, _ = reader.recv(86400)
        try:
            if cmd["op"] == "check":
                child.check(cmd)
            elif cmd["op"] == "time":
                child.time(cmd)
            else:
                child.send({"event": "bye", "findings": [f.model_dump() for f in child.findings_after_call()]})
                return 0
        except Exception as exc:
            child.send({"event": "harness_error", "error": "".join(traceback.format_exception(exc)[-4:])})


if __name__ == "__main__":
    sys.exit(main(sys.argv))
