"""The correctness phase: trials of the candidate's calls at every case, with fresh secret inputs written into the
same shared buffers, each output read back and judged by the harness (jg_mcp/eval/harness.py runs it)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from jg_mcp.eval.checks import call_findings, mass_findings, measure, metadata_findings
from jg_mcp.eval.memory import free_bytes, per_byte
from jg_mcp.eval.processes.process import CandidateGone, WorkerProcess
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import ErrorStats, EvalReport, Finding, ShapeResult
from jg_mcp.eval.shapes import Case, extremes
from jg_mcp.eval.wire.buffers import OutOfDeviceMemory, SharedBinding
from jg_mcp.eval.wire.messages import Call, Done, Release
from jg_mcp.goals import SEED_BITS

if TYPE_CHECKING:
    from jg_mcp.eval.harness import Evaluation

EXTREME_TRIALS = 2
"""Trials at an extreme shape, and on the CPU at a top shape: two still write new contents into the same buffers (a
cache by address shows), and each trial there costs seconds (attention_prefill's float32 reference at its corner:
about 1.5 s on an H100; in the Triton interpreter, attention_decode's top shapes took 39 of its eval's 43 s at three
trials each)."""

EDGE_KINDS = ("smoke", "domain", "timed")
"""The cases that get one more trial on the goal's edge-case inputs (`Goal.edge_inputs`): the cheap ones; a top or
extreme shape checks sizes, and its trials cost seconds each."""


def trials_at(case: Case, device: str, asked: int) -> int:
    """How many trials a case gets: `asked`, but at most EXTREME_TRIALS at an extreme shape or a CPU top shape."""
    few = case.kind == "extreme" or (case.kind == "top" and device == "cpu")
    return min(asked, EXTREME_TRIALS) if few else asked


def correctness(ev: Evaluation, report: EvalReport, cases: list[Case], proc: WorkerProcess | None) -> None:
    """Every case's correctness trials in the candidate's correctness process, each shape's result in the report;
    then, on a GPU and where every shape was correct, the domain's extremes (`check_extremes`)."""
    report.shapes = [ShapeResult(name=c.name, kind=c.kind, dims=c.dims, trials=0, correct=False) for c in cases]
    if proc is None:
        return
    try:
        for case, result in zip(cases, report.shapes, strict=True):
            mark = time.monotonic()
            check_case(ev, report, case, result, proc)
            result.wall_s["check"] = time.monotonic() - mark
        if ev.o.extremes and all(s.correct for s in report.shapes):
            check_extremes(ev, report, proc)  # a candidate wrong already is rejected: they could only add to that
    except CandidateGone as gone:
        report.add(gone.finding)


def check_extremes(ev: Evaluation, report: EvalReport, proc: WorkerProcess) -> None:
    """On a GPU, the domain's extremes (`shapes.extremes`), sized to the GPU memory free now (the harness's cache
    emptied) at the memory per byte the checks before took (`memory.per_byte`). A harness that runs out of memory at one
    anyway leaves it out with a note: the shortage is the eval's, not the candidate's."""
    free = free_bytes(ev.device)
    if free is None:
        return  # the CPU: the interpreter's small caps stand
    checked = [(s.check_peak_bytes, ev.goal.bytes(s.dims)) for s in report.shapes if s.check_peak_bytes is not None]
    for case in extremes(ev.goal, free, per_byte(checked), ev.rng):
        result = ShapeResult(
            name=case.name, kind=case.kind, dims=case.dims, trials=0, correct=False, chosen=case.chosen
        )
        report.shapes.append(result)
        mark = time.monotonic()
        try:
            check_case(ev, report, case, result, proc)
        except (OutOfDeviceMemory, torch.OutOfMemoryError) as short:
            report.shapes.remove(result)
            report.notes.append(f"{case.name} {case.dims} not checked, the harness's GPU memory was short: {short}")
            proc.send(Release(names=["in", "out"]))
            proc.recv()
            continue
        result.wall_s["check"] = time.monotonic() - mark


def check_case(ev: Evaluation, report: EvalReport, case: Case, result: ShapeResult, proc: WorkerProcess) -> None:
    """Trials with fresh secret inputs written into the same buffers: a cache keyed by address gives stale
    output, one keyed by contents never hits."""
    cuda = ev.device == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    held = torch.cuda.memory_allocated() if cuda else 0
    mark = time.monotonic()
    inputs, refs = ev.reference(case.dims, ev.rng.randrange(2**SEED_BITS))
    spent = {"check_reference": time.monotonic() - mark, "check_bind": 0.0, "check_calls": 0.0}
    ins, outs = SharedBinding("in", ev.device), SharedBinding("out", ev.device)
    in_views, out_views = ins.add_group(inputs), outs.add_group(ev.output_like(refs))
    worst: list[ErrorStats | None] = [None] * len(refs)
    poison = sorted({v.numel() * w for v in out_views for w in (1, 2, 4, 8)})
    previous: list[torch.Tensor] | None = None
    try:
        mark = time.monotonic()
        proc.bind(ins)
        proc.bind(outs)
        spent["check_bind"] = time.monotonic() - mark
        result.correct = True
        trials = trials_at(case, ev.device, ev.o.trials)
        edge = ev.goal.make_edge_inputs is not None and case.kind in EDGE_KINDS
        for trial in range(trials + edge):
            ev.progress(f"check {case.name} trial {trial + 1}/{trials + edge}")
            if trial:
                mark = time.monotonic()
                inputs, refs = ev.reference(case.dims, ev.rng.randrange(2**SEED_BITS), edge=trial == trials)
                spent["check_reference"] += time.monotonic() - mark
            for view, t in zip(in_views, inputs, strict=True):
                view.copy_(t)
            pristine = [raw.clone() for raw in ins.raws]
            outs.poison()
            ev.sync()
            mark = time.monotonic()
            proc.send(Call(fn="candidate", inputs=("in", 0), outputs=("out", 0), poison_bytes=poison))
            done = proc.expect(Done)
            spent["check_calls"] += time.monotonic() - mark
            found = judge(ev, done, out_views, refs, worst, trial)
            if not all(torch.equal(raw, p) for raw, p in zip(ins.raws, pristine, strict=True)):
                found.append(
                    Finding(
                        reason=Reason.INPUT_MODIFIED,
                        detail="an input differs after the call (read back by the harness)",
                    )
                )
            got = [v.clone() for v in out_views]
            same = previous is not None and all(torch.equal(a, b) for a, b in zip(got, previous, strict=True))
            if same and not found:
                found.append(
                    Finding(
                        reason=Reason.CACHED_OUTPUT,
                        detail="new contents in the same input buffers gave the earlier output: cached by address",
                    )
                )
            previous = got
            for f in found:
                said = f.detail + (" (on the goal's edge-case inputs)" if trial == trials else "")
                report.add(f.model_copy(update={"shape": case.name, "trial": trial, "detail": said}))
            result.trials = trial + 1
            if found:
                result.correct = False
                break
        proc.send(Release(names=["in", "out"]))
        proc.recv()
    finally:
        result.errors = [w for w in worst if w is not None]
        result.wall_s |= spent
        if cuda:
            shared = sum(raw.numel() for raw in ins.raws + outs.raws)
            result.check_peak_bytes = max(0, torch.cuda.max_memory_allocated() - held) + shared
        ins.free()
        outs.free()


def judge(
    ev: Evaluation,
    done: Done,
    out_views: list[torch.Tensor],
    refs: list[torch.Tensor],
    worst: list[ErrorStats | None],
    trial: int,
) -> list[Finding]:
    """Findings of one call: the worker's hints, how the call ended, then the harness's own reading of the output
    buffers, always: what the worker says can add findings, never skip a measurement."""
    found = list(done.hints) + call_findings(done)
    if done.raised is None and done.error is None and len(done.outputs) != len(refs):
        found.append(
            Finding(reason=Reason.WRONG_SHAPE, detail=f"returned {len(done.outputs)} outputs, expected {len(refs)}")
        )
    for meta, ref, spec in zip(done.outputs, refs, ev.outputs, strict=False):
        found += metadata_findings(meta, spec.dtype, list(ref.shape), ev.device)
    for i, (out, ref) in enumerate(zip(out_views, refs, strict=True)):
        measured = measure(out, ref, ev.tol.atol, ev.tol.rtol)
        value_found = measured.findings or mass_findings(out, ref, ev.tol.rtol)
        stats = measured.stats
        if value_found:
            stats = stats.model_copy(update={"failing_trial": trial})
        found += value_found
        prior = worst[i]
        if prior is None or (prior.failing_trial is None and (value_found or stats.max_abs > prior.max_abs)):
            worst[i] = stats
    return found
