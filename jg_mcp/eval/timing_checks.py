"""The checks that run inside the timing phase: each candidate block's inputs read back, a random call's outputs
judged (the spot check), and the fresh-input pass, whose single calls on inputs no callable could have seen must
be about as fast as the timed ones (jg_mcp/eval/timing.py says where each sits in the protocol)."""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from jg_mcp.eval.checks import mass_findings, measure
from jg_mcp.eval.processes.process import CandidateGone
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import EvalReport, Finding, ShapeResult, Timing
from jg_mcp.eval.sizing import rotation
from jg_mcp.eval.wire.buffers import SharedBinding
from jg_mcp.eval.wire.messages import Benched, DoBench
from jg_mcp.goals import SEED_BITS

if TYPE_CHECKING:
    from jg_mcp.eval.shapes import Case
    from jg_mcp.eval.timing import TimingPhase
    from jg_mcp.goals import Tolerance


def check_inputs(
    report: EvalReport,
    case: Case,
    shape: ShapeResult,
    hints: list[Finding],
    current: list[torch.Tensor],
    pristine: list[torch.Tensor],
) -> None:
    """After a candidate block: report the block's hints, and stop timing if an input (`current`, as the harness
    reads it now) differs from what the harness wrote (`pristine`)."""
    for f in hints:
        report.add(f.model_copy(update={"shape": case.name}))
    if not all(torch.equal(now, keep) for now, keep in zip(current, pristine, strict=True)):
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


def fresh_pass(
    t: TimingPhase,
    report: EvalReport,
    case: Case,
    shape: ShapeResult,
    sides: dict[str, dict[str, SharedBinding]],
    results: dict[str, Timing],
    lead: bool = False,
) -> None:
    """Single calls on inputs the harness writes into the callable's own fresh input set once the block's gate has
    passed, so that no callable (the candidate can read every buffer bound to it) sees them before its call;
    callables take turns call by call, so host noise falls on all of them alike. Every candidate output is checked.
    With `lead`, each call follows a lead block of its callable rotating over the timed sets, as its timed blocks
    did (on a power-capped GPU a single call otherwise runs at whatever clock the harness's own work left)."""
    p, ev = t.p, t.ev
    if p.fresh <= 0:
        return
    cand_side, base_side = sides["candidate"], sides["baseline"]
    n_sets = len(cand_side["tin"].groups)
    if not cand_side["fresh"].groups:
        first = ev.make_inputs(case.dims, ev.rng.randrange(2**SEED_BITS))
        for side, proc in ((cand_side, t.cand), (base_side, t.base)):
            side["fresh"].add_group(first)
            proc.bind(side["fresh"])
    times: dict[str, list[float]] = {n: [] for n in t.names}
    for _ in range(p.fresh):
        for name in t.names if t.pick.random() < 0.5 else t.names[::-1]:
            inputs = ev.make_inputs(case.dims, ev.rng.randrange(2**SEED_BITS))
            hints: list[Finding] = []
            if lead and results[name].lead:
                hints = t.lead_block(report, case, shape, name, rotation(results[name].lead, n_sets)).hints
            own = cand_side if name == "candidate" else base_side

            def write(views: list[torch.Tensor] = own["fresh"].groups[0], tensors: list[torch.Tensor] = inputs) -> None:
                for view, tensor in zip(views, tensors, strict=True):
                    view.copy_(tensor)

            if name == "candidate":
                own["ring"].poison(0)
            ran = t.block(name, [0], "fresh", before_go=write)
            times[name].append(ran.per_call_ms)
            if name == "candidate":
                check_inputs(report, case, shape, hints + ran.hints, own["fresh"].groups[0], inputs)
                spot_check(t.pick, ev.tol, report, case, shape, own["ring"], [ev.expected(inputs)], [0])
    for name, ts in times.items():
        results[name].fresh_median_ms = statistics.median(ts)
    if ev.o.do_bench:
        t.cand.freeze()
        for name in t.names[1:]:
            t.base.send(DoBench(fn=name, inputs="tin"))
            results[name].do_bench_ms = t.base.expect(Benched).median_ms
