"""The checks that run inside the timing phase: each candidate block's inputs read back, a random call's outputs
judged (the spot check), and the seen-input pass, whose blocks rerun on inputs the callable has seen must be no
faster than its timed ones on new inputs, beyond what the baselines show (jg_mcp/eval/timing.py says where each
sits in the protocol)."""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from jg_mcp.eval.checks import mass_findings, measure
from jg_mcp.eval.processes.process import CandidateGone
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import EvalReport, Finding, ShapeResult
from jg_mcp.eval.report_timing import Timing
from jg_mcp.eval.sizing import rotation
from jg_mcp.eval.wire.buffers import SharedBinding
from jg_mcp.eval.wire.messages import Benched, DoBench

if TYPE_CHECKING:
    from jg_mcp.eval.bench import Bench
    from jg_mcp.eval.shapes import Case
    from jg_mcp.eval.timing import TimingPhase
    from jg_mcp.goals import Tolerance


def check_inputs(report: EvalReport, case: Case, shape: ShapeResult, hints: list[Finding], intact: bool) -> None:
    """After a candidate block: report the block's hints, and stop timing unless its input sets, as the harness
    reads them back now, hold what it wrote (`intact`, jg_mcp/eval/input_sets.py)."""
    for f in hints:
        report.add(f.model_copy(update={"shape": case.name}))
    if not intact:
        shape.correct = False
        report.add(
            Finding(
                reason=Reason.INPUT_MODIFIED,
                shape=case.name,
                detail="an input set differs after a timed block (read back by the harness)",
            )
        )
        raise CandidateGone(
            Finding(
                reason=Reason.INPUT_MODIFIED,
                shape=case.name,
                detail="timing stopped: the inputs cannot be trusted any more",
            )
        )


def spot_check(
    pick: random.SystemRandom,
    tol: Tolerance,
    report: EvalReport,
    case: Case,
    shape: ShapeResult,
    ring: SharedBinding,
    refs: Sequence[list[torch.Tensor]],
    sets: list[int],
) -> int:
    """Judge the outputs of one call of the last block, picked at random, against its input set's reference. A block
    of more calls than the ring has slots wrote them in turn (call i to slot i modulo the slots): the pick is among
    the calls whose outputs are still there."""
    slots = len(ring.groups)
    j = pick.randrange(max(0, len(sets) - slots), len(sets))
    for out, ref in zip(ring.groups[j % slots], refs[sets[j]], strict=True):
        measured = measure(out, ref, tol.atol, tol.rtol)
        for f in measured.findings or mass_findings(out, ref, tol.rtol):
            shape.correct = False
            report.add(
                f.model_copy(
                    update={"shape": case.name, "detail": f"timed call {j + 1} of a block (spot check): {f.detail}"}
                )
            )
    return 1


def seen_pass(
    t: TimingPhase,
    report: EvalReport,
    b: Bench,
    results: dict[str, Timing],
    last: dict[str, list[int]],
    lead: bool = False,
) -> None:
    """Blocks that rerun each callable's last timed block on the inputs it read there, not renewed (`seen`
    per callable; callables take turns, so host noise falls on all of them alike): a callable that keeps results
    between calls is faster here than on the new inputs of its timed blocks, beyond what the baselines show
    (scoring.seen_inputs_gain). The candidate's inputs are read back and one call judged after each. With `lead`,
    each block follows a lead block of its callable, as its timed blocks did."""
    p, ev = t.p, t.ev
    if p.seen <= 0:
        return
    case, shape, own = b.case, b.shape, b.own
    n_sets = len(own)
    times: dict[str, list[float]] = {n: [] for n in t.names}
    for _ in range(p.seen):
        for name in t.names if t.pick.random() < 0.5 else t.names[::-1]:
            hints: list[Finding] = []
            if lead and results[name].lead:
                hints = t.lead_block(report, b, name, rotation(results[name].lead, n_sets)).hints
            if name == "candidate":
                b.ring.poison()
            ran = t.turns.block(name, last[name], "tin", b.ring)
            times[name].append(ran.per_call_ms)
            if name == "candidate":
                check_inputs(report, case, shape, hints + ran.hints, own.intact())
                spot_check(t.pick, ev.tol, report, case, shape, b.ring, own, last[name])
    for name, ts in times.items():
        results[name].seen_median_ms = statistics.median(ts)
    if ev.o.do_bench:
        t.cand.freeze()
        for name in t.names[1:]:
            t.base.send(DoBench(fn=name, inputs="tin"))
            results[name].do_bench_ms = t.base.expect(Benched).median_ms
