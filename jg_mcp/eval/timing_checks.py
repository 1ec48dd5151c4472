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
from jg_mcp.eval.wire.ring_reads import RingSample, gather

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


AGREE_TOLERANCES = 3.0
"""Two callables' outputs of one input set, each within the goal's tolerance of the reference, lie within two
tolerances of each other: a candidate's element further than this many tolerances from the baselines' is judged
against the reference."""


def written(order: Sequence[str], per_block: dict[str, int], lead: dict[str, int]) -> int:
    """How many of the baselines' ring slots, from the first, hold their outputs of a round's new inputs once the
    round's blocks have run in `order`: each baseline's lead block writes its first slots with outputs of inputs
    seen before, then its timed block the first `per_block` with outputs of the round's."""
    fresh: set[int] = set()
    for name in order:
        if name != "candidate":
            fresh = (fresh - set(range(lead.get(name, 0)))) | set(range(per_block[name]))
    return next(i for i in range(len(fresh) + 1) if i not in fresh)


def sampled_check(
    tol: Tolerance,
    report: EvalReport,
    b: Bench,
    sample: RingSample | None,
    baseline_ring: SharedBinding,
    baseline_calls: int,
    sets: list[int],
    refs: Sequence[list[torch.Tensor]] | None = None,
    first: int = 0,
) -> None:
    """Every call of a candidate's timed block, at the elements the harness read when the block ended (`sample`),
    against the baselines' outputs of the same input set at the same elements: every callable's timed block of a
    round reads the round's new inputs, call i set i, and the baselines' ring holds their outputs in its first
    `baseline_calls` slots, slot 0 holding that of the candidate's call `first` (`refs`: the candidate's input sets,
    by default the shape's per-call ones). A call whose read elements lie further than AGREE_TOLERANCES tolerances
    from the baselines' is judged at those elements against its set's reference, as they were when the clock
    stopped. A call that wrote something else than its result by then (work skipped on some calls, an answer put
    right after the block) is found whichever call it is, where the spot check judges one call, chosen at random, as
    its slot holds it later."""
    last = min(sample.bits[0].shape[0] if sample is not None and sample.bits else 0, first + baseline_calls)
    if sample is None or last <= first:
        return
    refs = b.own if refs is None else refs
    suspect = torch.zeros(last - first, dtype=torch.bool)
    for i, (picks, bits) in enumerate(zip(sample.picks, sample.bits, strict=True)):
        dtype = baseline_ring.groups[0][i].dtype
        mine = bits[first:last].view(dtype).to(torch.float64)
        theirs = gather(baseline_ring, i, picks[first:last]).view(dtype).to(torch.float64).to(mine.device)
        bound = AGREE_TOLERANCES * (tol.atol + tol.rtol * torch.maximum(mine.abs(), theirs.abs()))
        apart = ~((mine - theirs).abs() <= bound) & (mine != theirs)
        suspect |= apart.any(dim=1).cpu()
    for g in (first + k for k in torch.nonzero(suspect).flatten().tolist()):
        for i, (picks, bits) in enumerate(zip(sample.picks, sample.bits, strict=True)):
            ref = refs[sets[g]][i]
            out = bits[g].view(baseline_ring.groups[0][i].dtype)
            measured = measure(out, ref.reshape(-1)[picks[g].to(ref.device)], tol.atol, tol.rtol)
            for f in measured.findings:
                b.shape.correct = False
                detail = f"timed call {g + 1} of a block, at the elements read when its clock stopped: {f.detail}"
                report.add(f.model_copy(update={"shape": b.case.name, "detail": detail}))


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
