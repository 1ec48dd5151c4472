"""The harness: copy the solution and the goal out, check the source, run the candidate in its own (sandboxed)
process and the baselines in another, and decide the verdict here, in a process that never imports either.

Everything the verdict rests on lives in this process: the secret seed, the inputs made from it, the
references, the pristine copies the inputs are compared with after each call, the output buffers the
candidate's results are read from, the clock that checks its timings, and the report. The candidate process
is handed tensors over shared memory and returns bytes into the harness's buffers; what it says about itself
is a hint.
"""

from __future__ import annotations

import hashlib
import os
import random
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from jg_mcp import log
from jg_mcp.errors import JgError
from jg_mcp.eval.correctness import correctness
from jg_mcp.eval.environment import host_environment
from jg_mcp.eval.native.builds import build_key, compiled_a_kernel, keep, place, restore
from jg_mcp.eval.native.native import BY_PATH, NativeScan
from jg_mcp.eval.native.sources import SourceFile, private_goal, read_sources, solution_text
from jg_mcp.eval.native.stubs import forbids_gemm, library_files, stub_binds
from jg_mcp.eval.ops import forbidden_ops
from jg_mcp.eval.options import EvalOptions
from jg_mcp.eval.processes.compile_cache import baseline_env
from jg_mcp.eval.processes.compile_cache import root as cache_root
from jg_mcp.eval.processes.isolation import NOBODY, choose_isolation, prepare
from jg_mcp.eval.processes.process import TAIL_BYTES, CandidateGone, WorkerLaunch, WorkerProcess
from jg_mcp.eval.processes.proctree import sweep
from jg_mcp.eval.processes.spares import Spares, SpareSet
from jg_mcp.eval.reasons import ERROR_TAIL_CHARS, Reason
from jg_mcp.eval.report import Environment, EvalReport, Finding, Isolation, SourceRecord
from jg_mcp.eval.report_timing import TimingMethod
from jg_mcp.eval.scoring import score
from jg_mcp.eval.shapes import select_cases
from jg_mcp.eval.wire.messages import ImportFailed, Ready, Setup, WorkerError
from jg_mcp.goals import SEED_BITS, LoadedGoal
from jg_mcp.policy.check import static_check
from jg_mcp.policy.open_policy import open_check

_log = log.get("jg_mcp.eval")
Progress = Callable[[str], None]


class Evaluation:
    """One run of the harness over one solution. `open` does what makes one (the candidate's isolation chosen, a
    spare set taken or a work directory made, the goal copied into it, the host's native code noted); the
    constructor only holds what it made."""

    def __init__(
        self,
        options: EvalOptions,
        progress: Progress | None,
        device: str,
        isolation: Isolation,
        spares: Spares | None,
        spare: SpareSet | None,
        work: Path,
        goal: LoadedGoal,
        native: NativeScan,
    ):
        self.o = options
        self.progress = progress or (lambda _label: None)
        self.device = device
        self.seed = secrets.randbits(SEED_BITS)
        self.rng = random.Random(self.seed)
        self.isolation = isolation
        self.spares = spares
        self.spare = spare
        """The processes a previous eval started for this one (`jg_mcp.eval.processes.spares`), with their work and
        token."""
        self.token = spare.token if spare else secrets.token_hex(16)
        self.tails: list[str] = []
        self.procs: list[WorkerProcess] = []
        self.work = work
        self.goal = goal
        self.outputs = goal.goal.outputs
        self.tol = goal.goal.tolerance
        self.deadline: tuple[float, float] | None = None
        """When the eval's own time limit runs out (`WorkerProcess.deadline`), set as it starts."""
        self.baseline_cache: Path | None = None
        """The baselines' compile cache, chosen by `environment()` before any baseline process starts."""
        self.covers: tuple[tuple[str, str], ...] = ()
        """The libraries the goal forbids, each covered by a failing stub in the candidate's sandbox (GPU only)."""
        self.extensions: Path | None = None
        """Where this eval keeps the candidate's native build for the next eval of the same sources."""
        self.native = native
        """The judge of the native code the candidate's processes load, which it reads from /proc whenever they are
        stopped (each freeze, and before each is closed): its findings join the report at the end."""

    @classmethod
    def open(cls, options: EvalOptions, progress: Progress | None = None, spares: Spares | None = None) -> Evaluation:
        """An eval of `options`' solution, ready to `run`; with `spares` (used only under bwrap), the processes a
        previous eval started for it. What it made is removed again if it cannot be made whole."""
        device = options.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if device == "cuda" and not torch.cuda.is_available():
            raise JgError("--device cuda: no CUDA device is available here (torch sees none)")
        isolation = choose_isolation(options.isolation)
        spares = spares if isolation.sandbox == "bwrap" else None
        spare = spares.take() if spares is not None else None
        work = spare.work if spare else Path(tempfile.mkdtemp(prefix="jg-eval-"))
        try:
            goal = private_goal(Path(options.goal), work)
        except BaseException:
            if spare is not None:
                spare.close()
            shutil.rmtree(work, ignore_errors=True)
            raise
        native = NativeScan.open(goal.goal.forbidden, work)
        return cls(options, progress, device, isolation, spares, spare, work, goal, native)

    def run(self) -> EvalReport:
        start = time.monotonic()
        self.deadline = (start + self.o.total_timeout_s, self.o.total_timeout_s)
        try:
            return self._run(start)
        finally:
            for proc in self.procs:
                self.tails.append(proc.close())
            self.keep_build()  # before the spare set's close, which removes its work: this eval's work
            if self.spare is not None:
                self.spare.close()  # what this eval did not need
            if self.isolation.sandbox == "none":
                sweep(self.token)
            shutil.rmtree(self.work, ignore_errors=True)

    def _run(self, start: float) -> EvalReport:
        g = self.goal.goal
        rel = self.o.solution or g.solution.file
        files = read_sources(self.o.workspace, rel, everything=self.o.policy == "open")
        data = files[0].data
        place(files, self.work / "solution")
        (self.work / "cache").mkdir(exist_ok=True)  # a spare set's work holds it already
        prepare(self.work / "solution", self.work / "cache")
        report = EvalReport(
            goal=g.name,
            goal_sha256=self.goal.sha256(),
            solution_sha256=hashlib.sha256(data).hexdigest(),
            solution_file=str(self.o.workspace / rel),
            accepted=False,
            seed=self.seed,
            environment=self.environment(),
            isolation=self.isolation,
            policy=self.o.policy,
            sources=[
                SourceRecord(path=f.path, sha256=hashlib.sha256(f.data).hexdigest(), bytes=len(f.data)) for f in files
            ],
        )
        if self.o.expect_goal_sha256 and self.o.expect_goal_sha256 != report.goal_sha256:
            report.goal_changed = self.o.expect_goal_sha256
        reference = self.goal.module_path.read_bytes()
        for f in source_findings(self.o.policy, files, g.forbidden, reference, report.notes):
            report.add(f)
        self.extensions = self.restore_build(report)
        self.covers = self.stubbed(report)
        from jg_mcp.eval.memory import free_bytes

        free = free_bytes(self.device)  # before any worker allocates: what the tops may be sized to
        cases = select_cases(self.goal, self.o.shapes, self.device, self.o.domain_shapes, self.rng, self.o.only, free)
        kinds = ("timed", "smoke") if self.o.timing_on_cpu else ("timed",)
        timed = [c for c in cases if c.kind in kinds] if self.timed() else []
        candidate = self.spawn("candidate")
        timer = None
        if timed:
            from jg_mcp.eval.timing import TimingPhase

            timer = TimingPhase(self, self.spawn("candidate"), self.spawn("baseline"))
            timer.start(report, timed)
        if self.spares is not None:
            self.spares.prestart(
                self.device, self.o.timeout_s, candidates=2 if timed else 1, baseline=bool(timed), covers=self.covers
            )
        report.phases["setup"] = time.monotonic() - start
        mark = time.monotonic()
        started = self.ready(candidate, report)
        report.phases["candidate_start"] = time.monotonic() - mark
        correctness(self, report, cases, started)
        report.phases["correctness"] = time.monotonic() - mark
        self.end(candidate, report)
        if timer is not None:
            if self.spares is not None:
                mark = time.monotonic()
                self.spares.settle()  # no spare imports while this eval times
                report.phases["spares_wait"] = time.monotonic() - mark
            mark = time.monotonic()
            timer.run(report, timed)
            report.phases["timing"] = time.monotonic() - mark
        elif self.device != "cuda":
            report.timing = TimingMethod(skipped="no CUDA device: correctness only, Triton kernels in the interpreter")
        else:
            report.timing = TimingMethod(skipped="no timed shapes selected")
        for proc in self.procs:
            self.inspect(proc, report)
            self.tails.append(proc.close())
        self.procs.clear()
        for f in self.native.findings:
            report.add(f)
        if self.device == "cuda" and report.shapes and not compiled_a_kernel(self.work / "cache"):
            report.add(
                Finding(
                    reason=Reason.NO_KERNEL,
                    detail="the candidate compiled no kernel of its own (no Triton kernel, no CUDA code built): its "
                    "outputs came from torch's own kernels",
                )
            )
        if self.native.by_path and self.native.judged:
            missing = [*self.isolation.missing, BY_PATH]
            report.isolation = (report.isolation or self.isolation).model_copy(update={"missing": missing})
        if self.isolation.sandbox == "none" and (left := sweep(self.token)):
            report.add(
                Finding(
                    reason=Reason.THREADS_LEFT,
                    detail=f"processes the candidate started outlived it and were killed: {left[:10]}",
                )
            )
        report.candidate_output_tail = "\n".join(t for t in self.tails if t)[-TAIL_BYTES:]
        score(self.goal, report, self.o.timing)
        report.accepted = not report.findings and bool(report.shapes) and all(s.correct for s in report.shapes)
        report.wall_s = time.monotonic() - start
        report.phases["total"] = report.wall_s
        return report

    def restore_build(self, report: EvalReport) -> Path | None:
        """The native build kept for these very sources, put where the candidate's torch builds (`builds.restore`);
        returns where this eval's build is kept after it, or None (the Triton-only policy builds nothing native)."""
        if self.o.policy != "open":
            return None
        key = build_key(torch.__version__, report.environment.gpu, report.sources)
        return restore(key, self.work / "cache" / "torch_extensions", NOBODY if os.geteuid() == 0 else None)

    def stubbed(self, report: EvalReport) -> tuple[tuple[str, str], ...]:
        """Stubs for the cuBLAS files, where the goal forbids a GEMM and the candidate runs sandboxed on a GPU
        (`jg_mcp.eval.native.stubs`); the report's isolation names each file covered."""
        if self.device != "cuda" or self.isolation.sandbox != "bwrap" or not forbids_gemm(self.goal.goal.forbidden):
            return ()
        pairs = stub_binds(library_files(), cache_root() / "stubs")
        if report.isolation is not None:
            report.isolation = report.isolation.model_copy(update={"stubbed": [str(real) for _, real in pairs]})
        return tuple((str(stub), str(real)) for stub, real in pairs)

    def keep_build(self) -> None:
        """Keep what the candidate's sandbox built for the next eval of the same sources (`builds.keep`)."""
        keep(self.work / "cache" / "torch_extensions", self.extensions)

    def end(self, proc: WorkerProcess, report: EvalReport) -> None:
        """End a worker once its part is done: the correctness process (and its sandbox, with anything the candidate
        started there) is gone before timing, so no candidate code but the timed process's can run on the GPU
        while the baselines are timed. Its native code is judged first."""
        self.inspect(proc, report)
        self.tails.append(proc.close())
        self.procs.remove(proc)

    def inspect(self, proc: WorkerProcess, report: EvalReport) -> None:
        """Stop a candidate's processes and judge the native code they loaded (`NativeScan`), from outside them:
        the symbols a library binds are what it calls, however its source spelt them."""
        try:
            proc.inspect()
        except CandidateGone as gone:
            report.add(gone.finding)

    def sync(self) -> None:
        """Finish this process's queued writes to shared buffers (inputs, poison) before a worker reads them: they
        run on the harness's own CUDA stream, which the worker's process does not wait for."""
        if self.device == "cuda":
            torch.cuda.synchronize()

    def timed(self) -> bool:
        return self.device == "cuda" or self.o.timing_on_cpu

    def environment(self) -> Environment:
        environment, self.baseline_cache = host_environment(self.device, self.work)
        return environment

    def spawn(self, role: str) -> WorkerProcess:
        g = self.goal.goal
        if role == "candidate":
            module, functions = str(self.work / "solution" / "solution.py"), {"candidate": g.solution.function}
        else:
            module = str(self.goal.module_path)
            functions = {n: b.function for n, b in g.baselines.items() if self.device in b.devices}
        setup = Setup(
            role=role,
            device=self.device,
            module=module,
            functions=functions,
            forbidden_ops=sorted(forbidden_ops(g.forbidden)) if role == "candidate" else [],
        )
        sandboxed = role == "candidate" and self.isolation.sandbox == "bwrap"
        cache_env = None
        if role == "baseline":
            if self.baseline_cache is None:
                raise JgError("the baselines' compile cache is chosen by environment(), before a baseline process")
            cache_env = baseline_env(self.baseline_cache)
        covers = self.covers if sandboxed else ()
        proc = self.spare.pop(role, sandboxed, self.device, cache_env, covers) if self.spare else None
        if proc is None:
            launch = WorkerLaunch(
                role, self.work, sandboxed, self.token, self.o.timeout_s, self.device, cache_env, covers=covers
            )
            proc = WorkerProcess.spawn(launch)
        proc.timeout_s, proc.deadline = self.o.timeout_s, self.deadline
        proc.native = self.native if role == "candidate" else None
        proc.start(setup)
        self.procs.append(proc)
        return proc

    def ready(self, proc: WorkerProcess, report: EvalReport) -> WorkerProcess | None:
        """Wait for the process to import its module; None (and a finding) when the candidate could not be."""
        try:
            message = proc.recv()
        except CandidateGone as gone:
            report.add(gone.finding)
            return None
        if isinstance(message, ImportFailed):
            report.add(Finding(reason=Reason(message.reason), detail=message.error[-ERROR_TAIL_CHARS:]))
            return None
        if not isinstance(message, Ready):
            detail = getattr(message, "error", "")
            if proc.role == "baseline":
                raise JgError(f"the baseline process could not start: {detail}")
            proc.kill()  # the candidate's module may have written this itself: a finding, never a harness error
            if isinstance(message, WorkerError):
                what = f"the candidate process failed before it was ready: {detail[-ERROR_TAIL_CHARS:]}"
                report.add(Finding(reason=Reason.EXCEPTION, detail=what))
            else:
                what = f"result channel: `{message.event}` where `ready` was due (a forged or corrupted message)"
                report.add(Finding(reason=Reason.TAMPERED, detail=what))
            return None
        proc.ready = True
        for f in message.hints:
            report.add(f.model_copy(update={"detail": f.detail + " (at import)"}))
        return proc

    def reference(
        self, dims: dict[str, int], seed: int, edge: bool = False
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        inputs = self.make_inputs(dims, seed, edge)
        return inputs, self.expected(inputs)

    def make_inputs(self, dims: dict[str, int], seed: int, edge: bool = False) -> list[torch.Tensor]:
        maker = self.goal.make_edge_inputs if edge else self.goal.make_inputs
        assert maker is not None, "edge-case inputs asked of a goal without a maker of them"
        inputs = maker(dims, seed, self.device)
        if not all(isinstance(t, torch.Tensor) for t in inputs):
            raise JgError(f"goal {self.goal.name}: the input maker must return tensors only")
        return list(inputs)

    def expected(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """The reference's outputs for these inputs (float32 or wider)."""
        ref = self.goal.reference(*inputs)
        refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
        low = [str(r.dtype) for r in refs if r.is_floating_point() and r.element_size() < 4]
        if low:
            raise JgError(f"goal {self.goal.name}: the reference returns {', '.join(low)}; it must be float32 or wider")
        return refs

    def output_like(self, refs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Empty tensors shaped like the references, in the goal's output dtypes: the output buffers' layout."""
        return [
            torch.empty(r.shape, dtype=getattr(torch, spec.dtype), device=self.device)
            for r, spec in zip(refs, self.outputs, strict=False)
        ]


def evaluate(options: EvalOptions, progress: Progress | None = None, spares: Spares | None = None) -> EvalReport:
    """Evaluate one solution; every problem with the candidate is a finding, never an exception. With `spares`,
    take the processes a previous eval started for this one and start the next eval's."""
    report = Evaluation.open(options, progress, spares).run()
    _log.info("eval done", goal=report.goal, accepted=report.accepted, reasons=[str(r) for r in report.reasons])
    return report


def source_findings(
    policy: str, files: list[SourceFile], forbidden: list[str], reference: bytes, notes: list[str]
) -> list[Finding]:
    """The policy's findings in the solution's Python files (the Triton-only policy reads only the solution file;
    the open policy every Python file copied, but a copy of the goal's own module, `reference`, which the server put
    in the workspace and which is never imported as the solution)."""
    if policy == "triton":
        text = solution_text(files[0].data)  # what the worker's import compiles from the same bytes
        return [text] if isinstance(text, Finding) else static_check(text, forbidden, notes=notes)
    found: list[Finding] = []
    for i, file in enumerate(files):
        if i > 0 and (not file.path.endswith(".py") or file.data == reference):
            continue
        text = solution_text(file.data)
        where = "" if i == 0 else f"{file.path}: "
        for finding in [text] if isinstance(text, Finding) else open_check(text, forbidden):
            found.append(finding.model_copy(update={"detail": where + finding.detail}))
    return found
