"""Checks, in the harness process: is each output a plain, fresh, fully written tensor within the goal's tolerance?"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from jg_mcp.eval.reasons import ERROR_TAIL_CHARS, Reason
from jg_mcp.eval.report import ErrorStats, Finding
from jg_mcp.eval.wire.messages import Done, OutputMeta

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_FINITE_POISON = {getattr(torch, n) for n in ("float8_e4m3fnuz", "float8_e5m2fnuz") if hasattr(torch, n)}
"""Float types whose all-ones bytes (the harness's poison) are a finite number, not NaN."""
JUDGE_CHUNK = 1 << 24
"""Elements judged at once. The judge holds about 80 bytes of float64 and boolean temporaries per element (by its
code): whole, softmax's largest timed output (2^29 elements) would take about 40 GiB beside the timing's buffers,
more than an H100 has to spare; in chunks about 1.3 GiB at any size."""


def call_findings(done: Done) -> list[Finding]:
    """A call that did not return: the worker's structured `raised` says which way (an exit or an exception); the
    error text is only the finding's detail."""
    if done.raised == "exit":
        return [Finding(reason=Reason.EARLY_EXIT, detail=(done.error or "the callable exited")[-ERROR_TAIL_CHARS:])]
    if done.raised is not None or done.error is not None:
        return [Finding(reason=Reason.EXCEPTION, detail=(done.error or "the callable raised")[-ERROR_TAIL_CHARS:])]
    return []


def metadata_findings(meta: OutputMeta, dtype: str, shape: list[int], device: str) -> list[Finding]:
    """What the worker says was wrong with an output (a hint: the bytes in the harness's buffer decide)."""
    if not meta.plain:
        what = meta.type if meta.type != "torch.Tensor" else f"a tensor on {meta.device} that is not plain and strided"
        return [Finding(reason=Reason.NOT_PLAIN_TENSOR, detail=f"returned {what}, not a plain dense torch.Tensor")]
    found = []
    if meta.aliases_input:
        found.append(Finding(reason=Reason.ALIASES_INPUT, detail="the output shares storage with an input"))
    if meta.shape != shape:
        found.append(Finding(reason=Reason.WRONG_SHAPE, detail=f"shape {meta.shape}, expected {shape}"))
    if meta.dtype != dtype:
        found.append(Finding(reason=Reason.WRONG_DTYPE, detail=f"dtype {meta.dtype}, expected {dtype}"))
    if meta.device != device:
        found.append(Finding(reason=Reason.WRONG_DEVICE, detail=f"device {meta.device}, expected {device}"))
    return found


class Measured(NamedTuple):
    """One output judged against its reference."""

    stats: ErrorStats
    findings: list[Finding]
    """Empty when the output is correct."""
    worst_ratio: float
    """Largest |out - ref| / (atol + rtol |ref|) over the elements, inf where a value is poison, NaN or inf
    (or does not match a non-finite reference): above 1 is out of tolerance."""


class _Part(NamedTuple):
    """One chunk of an output judged: counts, extremes and the worst element (its index within the chunk)."""

    poison: int
    special: int
    outside: int
    bad: int
    max_abs: float
    max_rel: float
    worst_ratio: float
    worst: int
    worst_value: float
    worst_reference: float


def _judge(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> _Part:
    """`measure` of one flat chunk, judged on a float64 copy taken once: `out` is a buffer the candidate's process
    shares, and a float64 output's `.double()` would be that buffer itself, read anew by every check below."""
    o, r = out.to(torch.float64, copy=True), ref.double()
    r_abs = r.abs()
    bound = r_abs.mul(rtol).add_(atol)
    if out.dtype not in _FINITE_POISON and bool(torch.isfinite(o).all()) and bool(torch.isfinite(r).all()):
        # Nothing to classify apart (poison bytes read as NaN): half the passes over the chunk.
        err = o.sub(r).abs_()
        outside = err > bound
        ratio = torch.where(err > 0, err / bound, 0.0)
        rel = torch.where(r_abs > atol, err / r_abs.clamp_min(1e-300), 0.0)
        poison = special = 0
        bad = int(outside.sum())
    else:
        if out.dtype.is_floating_point:
            poisoned = out.view(_BITS[out.element_size()]).eq(-1 if out.element_size() > 1 else 255)
        else:
            poisoned = torch.zeros_like(r, dtype=torch.bool)
        r_finite, o_finite = torch.isfinite(r), torch.isfinite(o)
        nonfinite = r_finite & ~o_finite & ~poisoned
        mismatch = ~r_finite & ~((o == r) | (torch.isnan(o) & torch.isnan(r)))
        finite = r_finite & o_finite
        err = torch.where(finite, (o - r).abs(), 0.0)
        outside = finite & (err > bound)
        flagged = nonfinite | poisoned | mismatch
        # err / bound is inf where the bound is 0 (atol = rtol = 0) and the error is not; 0 / 0 counts as 0.
        ratio = torch.where(flagged, math.inf, torch.where(err > 0, err / bound, 0.0))
        rel = torch.where(r_finite & (r_abs > atol), err / r_abs.clamp_min(1e-300), 0.0)
        poison, special = int(poisoned.sum()), int(nonfinite.sum()) + int(mismatch.sum())
        bad = int((outside | flagged).sum())
    if not ratio.numel():
        return _Part(poison, special, 0, bad, 0.0, 0.0, 0.0, 0, 0.0, 0.0)
    worst = int(torch.argmax(ratio))
    return _Part(
        poison=poison,
        special=special,
        outside=int(outside.sum()),
        bad=bad,
        max_abs=float(err.max()),
        max_rel=float(rel.max()),
        worst_ratio=float(ratio.max()),
        worst=worst,
        worst_value=float(o[worst]),
        worst_reference=float(r[worst]),
    )


def unravel(flat: int, shape: list[int]) -> list[int]:
    """The index within `shape` of the element at `flat` in row-major order. torch.unravel_index gives the same, but
    its first call imports torch's symbolic shapes and sympy: 0.3 s in a process with their bytecode cached, 2-6 s
    in one without (the H100 image the GPU checks run on), in every eval's harness process."""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return index[::-1]


def measure(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> Measured:
    """Elementwise |out - ref| <= atol + rtol |ref| in float64; poison, NaN and inf are classified apart. Judged
    JUDGE_CHUNK elements at a time: the float64 temporaries stay the same size at any output size."""
    flat_out, flat_ref = out.to(ref.device).reshape(-1), ref.reshape(-1)
    n = out.numel()
    parts = [
        (first, _judge(flat_out[first : first + JUDGE_CHUNK], flat_ref[first : first + JUDGE_CHUNK], atol, rtol))
        for first in range(0, max(n, 1), JUDGE_CHUNK)
    ]
    first, top = max(parts, key=lambda fp: fp[1].worst_ratio)  # the first chunk of the largest, as argmax is
    worst = first + top.worst
    index = unravel(worst, list(out.shape)) if out.numel() else []
    stats = ErrorStats(
        max_abs=max(p.max_abs for _, p in parts),
        max_rel=max(p.max_rel for _, p in parts),
        worst_index=index,
        worst_value=top.worst_value,
        worst_reference=top.worst_reference,
        bad_elements=sum(p.bad for _, p in parts),
    )
    found = []
    if p := sum(part.poison for _, part in parts):
        found.append(
            Finding(reason=Reason.UNWRITTEN, detail=f"{p} of {n} elements still hold the harness's poison bytes")
        )
    if k := sum(part.special for _, part in parts):
        found.append(
            Finding(
                reason=Reason.NONFINITE,
                detail=f"{k} of {n} elements NaN/inf where the reference is finite (or vice versa)",
            )
        )
    if m := sum(part.outside for _, part in parts):
        found.append(
            Finding(
                reason=Reason.INCORRECT,
                detail=f"{m} of {n} elements outside atol {atol} + rtol {rtol}; worst at {index}: "
                f"{stats.worst_value:.6g} vs reference {stats.worst_reference:.6g}",
            )
        )
    return Measured(stats, found, max(part.worst_ratio for _, part in parts))


def mass_findings(out: torch.Tensor, ref: torch.Tensor, rtol: float) -> list[Finding]:
    """Row-wise L1 check where an elementwise bound is lax: over each row (the last dimension), the summed absolute
    error must stay under rtol times the row's summed |reference| (plus a tenth of the atol-free slack). Dropping or
    zeroing a meaningful share of a row's mass fails it even when each element is within atol."""
    if out.dim() == 0 or out.numel() == 0 or out.shape != ref.shape:
        return []
    outs, refs = out.to(ref.device).reshape(-1, out.shape[-1]), ref.reshape(-1, ref.shape[-1])
    rows = max(1, JUDGE_CHUNK // out.shape[-1])  # rows judged at once, as `measure` judges elements
    errs, masses = [], []
    for first in range(0, len(outs), rows):
        o, r = outs[first : first + rows].to(torch.float64, copy=True), refs[first : first + rows].double()
        finite = torch.isfinite(o) & torch.isfinite(r)
        if bool(finite.all()):
            errs.append((o - r).abs_().sum(-1))
            masses.append(r.abs().sum(-1))
        else:
            errs.append(torch.where(finite, (o - r).abs(), 0.0).sum(-1))
            masses.append(torch.where(finite, r.abs(), 0.0).sum(-1))
    err, mass = torch.cat(errs), torch.cat(masses)
    over = err > rtol * mass + 1e-30
    if not bool(over.any()):
        return []
    row = int(torch.argmax(torch.where(over, err / mass.clamp_min(1e-300), torch.zeros_like(err))))
    return [
        Finding(
            reason=Reason.INCORRECT,
            detail=f"{int(over.sum())} of {len(err)} rows lose more than rtol "
            f"{rtol} of their mass: row {row} has L1 error {float(err[row]):.4g} against L1 mass "
            f"{float(mass[row]):.4g}",
        )
    ]
