"""The harness: copy the solution out, check it statically, run it in fresh processes, and judge what comes back.

The harness process never imports the candidate. It draws the secret seed, makes its own inputs and its own
reference from it, and compares them with the output bytes the candidate process sends. Correctness runs
in one candidate process and timing in another, so state built during one phase cannot shape the other.
"""

from __future__ import annotations

import contextlib
import hashlib
import platform
import random
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

import jg_mcp
from jg_mcp import log
from jg_mcp.errors import JgError
from jg_mcp.eval.checks import decode, file_listing, measure, metadata_findings, sha256_tensors
from jg_mcp.eval.clocks import nvml_sampler
from jg_mcp.eval.options import EvalOptions
from jg_mcp.eval.policy import static_check
from jg_mcp.eval.process import CandidateGone, CandidateProcess
from jg_mcp.eval.report import (
    Environment,
    ErrorStats,
    EvalReport,
    Finding,
    Reason,
    ShapeResult,
    Timing,
    TimingMethod,
)
from jg_mcp.eval.scoring import score
from jg_mcp.eval.shapes import Case, select_cases
from jg_mcp.eval.timing import DEFAULTS, method
from jg_mcp.goals import LoadedGoal, load_goal

_log = log.get("jg_mcp.eval")
Progress = Callable[[str], None]


class Evaluation:
    """One run of the harness over one solution."""

    def __init__(self, options: EvalOptions, progress: Progress | None = None):
        self.o = options
        self.progress = progress or (lambda _label: None)
        self.goal: LoadedGoal = load_goal(options.goal)
        self.device = options.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.seed = secrets.randbits(62)
        self.rng = random.Random(self.seed)
        self.outputs = self.goal.goal.outputs
        self.tol = self.goal.goal.tolerance
        self.tails: list[str] = []
        self.procs: list[CandidateProcess] = []
        self.numel: dict[str, list[int]] = {}
        """Elements of each reference output per shape, for the candidate process's poisoning."""

    def run(self) -> EvalReport:
        start = time.monotonic()
        g = self.goal.goal
        source = self.o.workspace / (self.o.solution or g.solution.file)
        if not source.is_file():
            raise JgError(f"no solution file {source}")
        work = Path(tempfile.mkdtemp(prefix="jg-eval-"))
        try:
            copied = work / "solution" / "solution.py"
            copied.parent.mkdir()
            shutil.copyfile(source, copied)
            data = copied.read_bytes()
            report = EvalReport(
                goal=g.name,
                goal_sha256=self.goal.sha256(),
                solution_sha256=hashlib.sha256(data).hexdigest(),
                solution_file=str(source),
                accepted=False,
                seed=self.seed,
                environment=self.environment(),
            )
            for f in static_check(data.decode(errors="replace"), g.forbidden):
                report.add(f)
            cases = select_cases(self.goal, self.o.shapes, self.device, self.o.domain_shapes, self.rng, self.o.only)
            (work / "cwd").mkdir()
            # Python-level writes are seen in the candidate process itself; native ones (torch.save) only by
            # comparing listings, which for the shared /dev/shm also sees other processes' files.
            watched = [self.o.workspace.resolve(), work / "cwd", copied.parent, Path("/dev/shm")]
            before = file_listing(watched)
            setup = {
                "goal": str(self.goal.yaml_path.resolve()),
                "solution": str(copied),
                "function": g.solution.function,
            }
            setup |= {"device": self.device, "watch": [str(p) for p in watched]}
            timed = [c for c in cases if c.kind == "timed"]
            # The timing process starts now so its interpreter start-up overlaps the correctness phase.
            timer = self.spawn(setup, work) if self.device == "cuda" and timed else None
            self.correctness(report, cases, self.ready(self.spawn(setup, work), report))
            if self.device != "cuda":
                report.timing = TimingMethod(
                    skipped="no CUDA device: correctness only, Triton kernels in the interpreter"
                )
            elif timer is None:
                report.timing = TimingMethod(skipped="no timed shapes selected")
            else:
                self.timing(report, timed, self.ready(timer, report))
            changed = sorted(p for p, st in file_listing(watched).items() if before.get(p) != st)
            if changed:
                report.add(
                    Finding(reason=Reason.FILES_WRITTEN, detail="created or changed: " + ", ".join(changed[:10]))
                )
            report.candidate_output_tail = "\n".join(t for t in self.tails if t)[-4000:]
            score(self.goal, report)
            report.accepted = not report.findings and all(s.correct for s in report.shapes) and bool(report.shapes)
            report.wall_s = time.monotonic() - start
            return report
        finally:
            for proc in self.procs:
                proc.kill()
            shutil.rmtree(work, ignore_errors=True)

    def environment(self) -> Environment:
        import triton

        from jg_mcp.gpu import query_gpu

        gpu = query_gpu() if self.device == "cuda" else None
        return Environment(
            device=self.device,
            gpu=torch.cuda.get_device_name() if self.device == "cuda" else None,
            driver=gpu.driver_version if gpu else None,
            torch=torch.__version__,
            triton=triton.__version__,
            python=platform.python_version(),
            jg_mcp=jg_mcp.__version__,
            host=platform.node(),
            interpreter=self.device != "cuda",
        )

    def spawn(self, setup: dict[str, Any], work: Path) -> CandidateProcess:
        proc = CandidateProcess(setup, work, self.device != "cuda", self.o.timeout_s)
        self.procs.append(proc)
        return proc

    def ready(self, proc: CandidateProcess, report: EvalReport) -> CandidateProcess | None:
        """Wait for the process to import the candidate; None (and a finding) when it could not."""
        try:
            header, _ = proc.recv()
        except CandidateGone as gone:
            report.add(gone.finding)
            self.tails.append(proc.close())
            return None
        if header["event"] == "harness_error":
            self.tails.append(proc.close())
            raise JgError(f"the candidate process could not be set up: {header['error']}")
        try:
            if header["event"] == "import_error":
                report.add(Finding(reason=Reason(header["reason"]), detail=str(header["error"])[-2000:]))
                self.tails.append(proc.close())
                return None
            if header["event"] != "ready":
                raise ValueError(header["event"])
            found = [Finding.model_validate(f | {"detail": f["detail"] + " (at import)"}) for f in header["findings"]]
        except (ValueError, KeyError, TypeError):
            report.add(_forged("unexpected message while the candidate was imported"))
            self.tails.append(proc.close())
            return None
        for f in found:
            report.add(f)
        return proc

    def reference(self, dims: dict[str, int], seed: int) -> tuple[tuple, list[torch.Tensor]]:
        inputs = self.goal.make_inputs(dims, seed, self.device)
        ref = self.goal.reference(*inputs)
        refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
        low = [str(r.dtype) for r in refs if r.is_floating_point() and r.element_size() < 4]
        if low:
            raise JgError(f"goal {self.goal.name}: the reference returns {', '.join(low)}; it must be float32 or wider")
        return inputs, refs

    def correctness(self, report: EvalReport, cases: list[Case], proc: CandidateProcess | None) -> None:
        results = [ShapeResult(name=c.name, kind=c.kind, dims=c.dims, trials=0, correct=False) for c in cases]
        report.shapes = results
        if proc is None:
            return
        try:
            for case, result in zip(cases, results):
                worst: list[ErrorStats | None] = [None] * len(self.outputs)
                ok = True
                for trial in range(self.o.trials):
                    self.progress(f"check {case.name} trial {trial + 1}/{self.o.trials}")
                    good = self.trial(proc, report, case, trial, worst)
                    result.trials = trial + 1
                    ok &= good
                    if not good:
                        break
                result.errors = [w for w in worst if w is not None]
                result.correct = ok
        except CandidateGone as gone:
            report.add(gone.finding)
        self.tails.append(proc.close())

    def trial(self, proc: CandidateProcess, report: EvalReport, case: Case, trial: int, worst: list) -> bool:
        seed = self.rng.randrange(2**62)
        refill = self.rng.randrange(2**62) if trial == 0 else None
        made = None
        if case.name not in self.numel:
            made = self.reference(case.dims, seed)
            self.numel[case.name] = [r.numel() for r in made[1]]
        proc.send(
            {"op": "check", "dims": case.dims, "seed": seed, "refill_seed": refill, "numel": self.numel[case.name]}
        )
        inputs, refs = made or self.reference(case.dims, seed)
        expected = {"c1": (inputs, refs), "c2": (inputs, refs)}
        if refill is not None:
            expected["c3"] = self.reference(case.dims, refill)
        ok, got, seen, failed = True, {}, [], False
        while True:
            header, blobs = proc.recv()
            if header["event"] == "end":
                if len(seen) < len(expected) and not failed:
                    raise CandidateGone(_forged("the trial ended before every call reported"))
                break
            label = header.get("label")
            if header["event"] != "call" or [*seen, label] != list(expected)[: len(seen) + 1]:
                raise CandidateGone(_forged(f"unexpected message {header['event']!r} {label!r}"))
            seen.append(label)
            failed = bool(header.get("error"))
            ok &= self.judge_call(report, case, trial, header, blobs, *expected[label], worst, got, label)
        c1, c3 = got.get("c1"), got.get("c3")
        if c1 and c3 and got.get("c1_ok"):
            same = all(torch.equal(a, b) for a, b in zip(c1, c3))
            if same and not all(torch.equal(a, b) for a, b in zip(refs, expected["c3"][1])):
                ok = False
                report.add(
                    Finding(
                        reason=Reason.CACHED_OUTPUT,
                        detail="new contents in the same input buffers gave the earlier output: cached by address",
                        shape=case.name,
                        trial=trial,
                    )
                )
        return ok

    def judge_call(
        self,
        report: EvalReport,
        case: Case,
        trial: int,
        header: dict,
        blobs: list[bytes],
        inputs: tuple,
        refs: list[torch.Tensor],
        worst: list,
        got: dict,
        label: str,
    ) -> bool:
        """Turn one call's facts into findings; True when this call is correct and clean."""
        try:
            found = [Finding.model_validate(f) for f in header.get("findings", [])]
        except (ValidationError, TypeError):
            raise CandidateGone(_forged("malformed findings")) from None
        if header.get("error") and header["error"] != "SystemExit":
            found.append(Finding(reason=Reason.EXCEPTION, detail=header["error"][-1500:]))
        outs = header.get("outputs")
        if outs is not None:
            if len(outs) != len(refs):
                found.append(
                    Finding(reason=Reason.WRONG_SHAPE, detail=f"returned {len(outs)} outputs, expected {len(refs)}")
                )
            if header.get("input_sha") != sha256_tensors(inputs):
                found.append(Finding(reason=Reason.INPUT_MODIFIED, detail="an input differs after the call"))
            if label != "c1" and header.get("launches") == 0 and got.get("c1_launches", 0) > 0:
                found.append(
                    Finding(reason=Reason.CACHED_OUTPUT, detail="no kernel launched on a repeat call: output cached")
                )
            if label == "c1":
                got["c1_launches"] = header.get("launches", 0)
            decoded = []
            for i, (desc, ref, spec) in enumerate(zip(outs, refs, self.outputs)):
                if desc.get("shares_earlier"):
                    found.append(Finding(reason=Reason.CACHED_OUTPUT, detail="returned storage it had returned before"))
                meta = metadata_findings(desc, spec.dtype, list(ref.shape), self.device)
                found += meta
                if meta or "blob" not in desc:
                    continue
                try:
                    out = decode(desc, blobs[desc["blob"]])
                except (AttributeError, IndexError, KeyError, RuntimeError, TypeError, ValueError):
                    raise CandidateGone(_forged("output bytes do not match their description")) from None
                decoded.append(out)
                stats, value_found, _ = measure(out, ref, self.tol.atol, self.tol.rtol)
                if value_found:
                    stats.failing_trial = trial
                found += value_found
                if worst[i] is None or (
                    worst[i].failing_trial is None and (value_found or stats.max_abs > worst[i].max_abs)
                ):
                    worst[i] = stats
            got[label] = decoded
            got[f"{label}_ok"] = not found
        for f in found:
            report.add(f.model_copy(update={"shape": case.name, "trial": trial}))
        return not found

    def timing(self, report: EvalReport, cases: list[Case], proc: CandidateProcess | None) -> None:
        params = DEFAULTS | self.o.timing | {"do_bench": self.o.do_bench}
        report.timing = method(params)
        if proc is None:
            return
        cuda = self.device == "cuda"
        uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid) if cuda else None
        baselines = [n for n, b in self.goal.goal.baselines.items() if "cuda" in b.devices]
        by_name = {s.name: s for s in report.shapes}
        try:
            for case in cases:
                self.progress(f"time {case.name}")
                seeds = [self.rng.randrange(2**62) for _ in range(params["input_sets"])]
                proc.send(
                    {
                        "op": "time",
                        "dims": case.dims,
                        "seeds": seeds,
                        "fresh_seeds": [self.rng.randrange(2**62) for _ in range(params["fresh"])],
                        "baselines": baselines,
                        "params": params,
                        "numel": self.numel[case.name],
                    }
                )
                shape = by_name[case.name]
                sampler = nvml_sampler(uuid) if uuid else None
                with sampler or contextlib.nullcontext():
                    header, _ = proc.recv()
                shape.clocks = sampler.summary() if sampler else None
                if header["event"] != "timing":
                    raise CandidateGone(_forged(f"unexpected message {header['event']!r} while timing"))
                try:
                    shape.candidate, shape.baselines = _timings(header["results"])
                    found = [Finding.model_validate(f | {"shape": case.name}) for f in header["findings"]]
                except (ValidationError, KeyError, TypeError, AttributeError):
                    raise CandidateGone(_forged("malformed timing results")) from None
                for f in found:
                    report.add(f)
                spots = min(params["spot_checks"], params["min_reps"])
                expected = [f"spot_{n}" for n in range(spots)] + ["verify"]
                for label in expected:
                    header, blobs = proc.recv()
                    if header["event"] != "call" or header.get("label") != label:
                        what = f"{header['event']!r} {header.get('label')!r}"
                        raise CandidateGone(_forged(f"{what} where {label} was due"))
                    i = header.get("set", 0) if label != "verify" else 0
                    if type(i) is not int or not 0 <= i < len(seeds):
                        raise CandidateGone(_forged(f"input set {i!r} of {label}"))
                    inputs, refs = self.reference(case.dims, seeds[i])
                    shape.correct &= self.judge_call(
                        report, case, -1, header, blobs, inputs, refs, [None] * len(refs), {}, label
                    )
                if proc.recv()[0]["event"] != "end":
                    raise CandidateGone(_forged("a message after the last check of the timing phase"))
        except CandidateGone as gone:
            report.add(gone.finding)
        self.tails.append(proc.close())


def _forged(what: str) -> Finding:
    return Finding(reason=Reason.TAMPERED, detail=f"result channel: {what} (a forged or corrupted message)")


def _timings(results: dict[str, Any]) -> tuple[Timing, dict[str, Timing]]:
    cand = Timing.model_validate(results.pop("candidate"))
    return cand, {k: Timing.model_validate(v) for k, v in results.items()}


def evaluate(options: EvalOptions, progress: Progress | None = None) -> EvalReport:
    """Evaluate one solution; every problem with the candidate is a finding, never an exception."""
    report = Evaluation(options, progress).run()
    _log.info("eval done", goal=report.goal, accepted=report.accepted, reasons=[str(r) for r in report.reasons])
    return report
