"""Checks, in the harness process: is each output a plain, fresh, fully written tensor within the goal's tolerance?"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import Any, NamedTuple

import torch

from jg_mcp.eval.report import ErrorStats, Finding, Reason

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def metadata_findings(desc: dict[str, Any], dtype: str, shape: list[int], device: str) -> list[Finding]:
    """Everything wrong with an output before its values are looked at."""
    if not desc.get("plain"):
        what = desc.get("type")
        if what == "torch.Tensor":
            what = f"a {desc.get('layout')} tensor on {desc.get('device')} that is not dense"
        return [Finding(reason=Reason.NOT_PLAIN_TENSOR, detail=f"returned {what}, not a plain dense torch.Tensor")]
    found = []
    if desc["aliases_input"]:
        found.append(Finding(reason=Reason.ALIASES_INPUT, detail="the output shares storage with an input"))
    if desc["shape"] != shape:
        found.append(Finding(reason=Reason.WRONG_SHAPE, detail=f"shape {desc['shape']}, expected {shape}"))
    if desc["dtype"] != dtype:
        found.append(Finding(reason=Reason.WRONG_DTYPE, detail=f"dtype {desc['dtype']}, expected {dtype}"))
    if desc["device"] != device:
        found.append(Finding(reason=Reason.WRONG_DEVICE, detail=f"device {desc['device']}, expected {device}"))
    return found


def decode(desc: dict[str, Any], blob: bytes) -> torch.Tensor:
    """The output as a CPU tensor, rebuilt from its raw bytes (no pickle)."""
    raw = torch.frombuffer(bytearray(blob), dtype=torch.uint8) if blob else torch.empty(0, dtype=torch.uint8)
    return raw.view(getattr(torch, desc["dtype"])).reshape(desc["shape"])


class Measured(NamedTuple):
    """One output judged against its reference."""

    stats: ErrorStats
    findings: list[Finding]
    """Empty when the output is correct."""
    worst_ratio: float
    """Largest |out - ref| / (atol + rtol |ref|) over the elements, inf where a value is poison, NaN or inf
    (or does not match a non-finite reference): above 1 is out of tolerance."""


def measure(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> Measured:
    """Elementwise |out - ref| <= atol + rtol |ref| in float64; poison, NaN and inf are classified apart."""
    out = out.to(ref.device)
    o, r = out.double(), ref.double()
    if out.dtype.is_floating_point:
        poison = out.reshape(-1).view(_BITS[out.element_size()]).eq(-1 if out.element_size() > 1 else 255)
        poison = poison.reshape(out.shape)
    else:
        poison = torch.zeros_like(r, dtype=torch.bool)
    r_finite = torch.isfinite(r)
    o_finite = torch.isfinite(o)
    nonfinite = r_finite & ~o_finite & ~poison
    mismatch_special = ~r_finite & ~((o == r) | (torch.isnan(o) & torch.isnan(r)))
    err = torch.where(r_finite & o_finite, (o - r).abs(), torch.zeros_like(o))
    bound = atol + rtol * r.abs()
    outside = r_finite & o_finite & (err > bound)
    special = nonfinite | poison | mismatch_special
    bad = outside | special
    # err / bound is inf where the bound is 0 (atol = rtol = 0) and the error is not; 0 / 0 counts as 0.
    ratio = torch.where(special, math.inf, torch.where(err > 0, err / bound, 0.0))
    worst = int(torch.argmax(ratio.reshape(-1))) if ratio.numel() else 0
    index = [int(i) for i in torch.unravel_index(torch.tensor(worst), out.shape)] if out.dim() else []
    big = r_finite & (r.abs() > atol)
    rel = torch.where(big, err / r.abs().clamp_min(1e-300), torch.zeros_like(o))
    stats = ErrorStats(
        max_abs=float(err.max()) if err.numel() else 0.0,
        max_rel=float(rel.max()) if rel.numel() else 0.0,
        worst_index=index,
        worst_value=float(o.reshape(-1)[worst]) if o.numel() else 0.0,
        worst_reference=float(r.reshape(-1)[worst]) if r.numel() else 0.0,
        bad_elements=int(bad.sum()),
    )
    found = []
    n = out.numel()
    if p := int(poison.sum()):
        found.append(
            Finding(reason=Reason.UNWRITTEN, detail=f"{p} of {n} elements still hold the harness's poison bytes")
        )
    if k := int(nonfinite.sum()) + int(mismatch_special.sum()):
        found.append(
            Finding(
                reason=Reason.NONFINITE,
                detail=f"{k} of {n} elements NaN/inf where the reference is finite (or vice versa)",
            )
        )
    if m := int(outside.sum()):
        found.append(
            Finding(
                reason=Reason.INCORRECT,
                detail=f"{m} of {n} elements outside atol {atol} + rtol {rtol}; worst at {index}: "
                f"{stats.worst_value:.6g} vs reference {stats.worst_reference:.6g}",
            )
        )
    return Measured(stats, found, float(ratio.max()) if ratio.numel() else 0.0)


def sha256_tensors(inputs: tuple) -> list[str | None]:
    """Hash of each tensor argument's bytes, to prove the inputs unchanged after a call."""
    return [
        hashlib.sha256(t.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy()).hexdigest()
        if isinstance(t, torch.Tensor)
        else None
        for t in inputs
    ]


def file_listing(roots: list[Path]) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file under `roots`, to find files a candidate wrote."""
    seen = {}
    for root in roots:
        if not root.is_dir():
            continue
        for dirpath, _, names in os.walk(root):
            for n in names:
                p = os.path.join(dirpath, n)
                try:
                    st = os.stat(p, follow_symlinks=False)
                except OSError:
                    continue
                seen[p] = (st.st_size, st.st_mtime_ns)
    return seen
