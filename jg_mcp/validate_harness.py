"""The validation of a goal's trusted harness code, run in this process: every input depends on the seed
(input_checks), the reference's outputs are sane and every baseline agrees with them shape by shape (check_shape,
check_outputs), and on a GPU the baselines are timed (triton.testing.do_bench with WARMUP_MS, REP_MS, QUANTILES).
"""

from __future__ import annotations

import inspect
import zlib
from collections.abc import Callable
from typing import Any

import torch

from jg_mcp.eval.checks import measure
from jg_mcp.goals import Goal, LoadedGoal, Shape
from jg_mcp.validate_report import BaselineTiming, Check

WARMUP_MS = 25
REP_MS = 100
QUANTILES = (0.5, 0.2, 0.8)


def seed_for(goal: str, shape: str) -> int:
    """A fixed seed per goal and shape, so every run checks the same inputs."""
    return zlib.crc32(f"{goal}/{shape}".encode())


def _as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _input_names(loaded: LoadedGoal, count: int) -> list[str]:
    """The reference's parameter names, which are the inputs' names in the goal's text, else `#1`, `#2`..."""
    try:
        params = list(inspect.signature(loaded.reference).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names if len(names) == count else [f"#{i + 1}" for i in range(count)]


def _same_bytes(a: Any, b: Any) -> bool:
    """Both tensors of one dtype and shape holding the same bytes (NaNs and signed zeros included)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or (a.dtype, a.shape) != (b.dtype, b.shape):
        return False
    raw_a, raw_b = (t.detach().cpu().contiguous().reshape(-1).view(torch.uint8) for t in (a, b))
    return torch.equal(raw_a, raw_b)


def input_checks(loaded: LoadedGoal, device: str) -> list[Check]:
    """Every input must depend on the seed: one the eval always makes the same is one a kernel can ignore, rebuild
    or precompute and still pass (a rope kernel once ignored its table). Each smoke shape's inputs are made with two
    seeds; an input byte-identical under both at every smoke shape fails, named. One `ok` row when none is."""
    goal = loaded.goal
    constant: list[bool] = []
    try:
        for n, shape in enumerate(goal.smoke_shapes):
            seeds = seed_for(goal.name, shape.name), seed_for(goal.name, f"{shape.name}/second")
            first, second = (_as_tuple(loaded.make_inputs(shape.dims, seed, device)) for seed in seeds)
            same = [_same_bytes(a, b) for a, b in zip(first, second, strict=False)]
            constant = same if n == 0 else [c and s for c, s in zip(constant, same, strict=False)]
    except Exception as exc:
        error = f"inputs raised {type(exc).__name__}: {exc}"
        return [Check(goal=goal.name, shape="*", check="inputs", status="failed", error=error)]
    names = _input_names(loaded, len(constant))
    shapes = ", ".join(s.name for s in goal.smoke_shapes)
    failed = [
        Check(
            goal=goal.name,
            shape="*",
            check="inputs",
            status="failed",
            error=f"input {names[i]} ({i + 1} of {len(constant)}) is byte-identical for two seeds at every smoke "
            f"shape ({shapes}): it does not depend on the seed, so a kernel could ignore it and still pass",
        )
        for i, same in enumerate(constant)
        if same
    ]
    return failed or [Check(goal=goal.name, shape="*", check="inputs", status="ok")]


def check_outputs(goal: Goal, out: Any, ref: Any) -> tuple[float | None, float | None, str]:
    """(max abs error, worst error/tolerance ratio, problem or ''). Count, type, dtype, shape and device are
    checked first, and a mismatch there has no error to measure; the values are judged by the eval's own check."""
    outs, refs = _as_tuple(out), _as_tuple(ref)
    if len(outs) != len(goal.outputs):
        return None, None, f"returned {len(outs)} outputs, expected {len(goal.outputs)}"
    for o, r, spec in zip(outs, refs, goal.outputs, strict=True):
        if type(o) is not torch.Tensor:
            return None, None, f"output {spec.name} is a {type(o).__name__}, not a torch.Tensor"
        if o.dtype != getattr(torch, spec.dtype):
            return None, None, f"output {spec.name} is {o.dtype}, expected {spec.dtype}"
        if o.shape != r.shape or o.device != r.device:
            return (
                None,
                None,
                f"output {spec.name} is {tuple(o.shape)} on {o.device}, expected {tuple(r.shape)} on {r.device}",
            )
    tol = goal.tolerance
    measured = [measure(o, r, tol.atol, tol.rtol) for o, r in zip(outs, refs, strict=True)]
    problems = [
        f"{spec.name}: {'; '.join(f.detail for f in m.findings)}"
        for m, spec in zip(measured, goal.outputs, strict=True)
        if m.findings
    ]
    max_abs = max(m.stats.max_abs for m in measured)
    worst = max(m.worst_ratio for m in measured)
    return max_abs, worst, "; ".join(problems)


def _reference_problem(goal: Goal, ref: Any) -> str:
    refs = _as_tuple(ref)
    if len(refs) != len(goal.outputs):
        return f"reference returned {len(refs)} outputs, the goal declares {len(goal.outputs)}"
    for r, spec in zip(refs, goal.outputs, strict=True):
        if type(r) is not torch.Tensor or r.dtype != torch.float32:
            return f"reference output {spec.name} is not a float32 tensor"
        if not bool(torch.isfinite(r).all()):
            return f"reference output {spec.name} has non-finite values"
    return ""


def _run_check(goal: Goal, shape: Shape, label: str, fn: Callable, inputs: tuple, ref: Any) -> Check:
    """One candidate at one shape; whatever it raises is its failure, not the validator's."""
    try:
        out = fn(*inputs)
        if inputs[0].is_cuda:
            torch.cuda.synchronize()
    except Exception as exc:
        return Check(
            goal=goal.name, shape=shape.name, check=label, status="failed", error=f"{type(exc).__name__}: {exc}"
        )
    max_abs, worst, problem = check_outputs(goal, out, ref)
    status = "failed" if problem else "ok"
    return Check(
        goal=goal.name,
        shape=shape.name,
        check=label,
        status=status,
        max_abs_err=max_abs,
        worst_ratio=worst,
        error=problem,
    )


def _time(loaded: LoadedGoal, shape: Shape, name: str, fn: Callable, inputs: tuple) -> BaselineTiming:
    import triton.testing

    median, p20, p80 = triton.testing.do_bench(
        lambda: fn(*inputs), warmup=WARMUP_MS, rep=REP_MS, quantiles=list(QUANTILES)
    )
    hw = loaded.goal.hardware
    flops, nbytes, seconds = loaded.flops(shape.dims), loaded.bytes(shape.dims), median * 1e-3
    floor = max(flops / (hw.peak_tflops * 1e12), nbytes / (hw.peak_bandwidth_tbps * 1e12))
    return BaselineTiming(
        goal=loaded.name,
        shape=shape.name,
        baseline=name,
        median_ms=median,
        p20_ms=p20,
        p80_ms=p80,
        tflops=flops / seconds / 1e12,
        tbps=nbytes / seconds / 1e12,
        pct_peak_flops=100 * flops / seconds / 1e12 / hw.peak_tflops,
        pct_peak_bandwidth=100 * nbytes / seconds / 1e12 / hw.peak_bandwidth_tbps,
        pct_roofline=100 * floor / seconds,
    )


def check_shape(
    loaded: LoadedGoal, shape: Shape, device: str, candidates: dict[str, Callable], timed: set[str]
) -> tuple[list[Check], list[BaselineTiming]]:
    """Make the inputs, compute the reference, check every candidate against it, time those in `timed`."""
    goal = loaded.goal
    try:
        inputs = loaded.make_inputs(shape.dims, seed_for(goal.name, shape.name), device)
        ref = loaded.reference(*inputs)
        problem = _reference_problem(goal, ref)
    except Exception as exc:
        problem = f"inputs or reference raised {type(exc).__name__}: {exc}"
    checks = [
        Check(goal=goal.name, shape=shape.name, check="reference", status="failed" if problem else "ok", error=problem)
    ]
    timings: list[BaselineTiming] = []
    if problem:
        return checks, timings
    for label, fn in candidates.items():
        check = _run_check(goal, shape, label, fn, inputs, ref)
        checks.append(check)
        if check.status != "ok" or label not in timed:
            continue
        try:
            timings.append(_time(loaded, shape, label.removeprefix("baseline:"), fn, inputs))
        except Exception as exc:
            error = f"timing raised {type(exc).__name__}: {exc}"
            checks.append(
                Check(goal=goal.name, shape=shape.name, check=f"timing:{label}", status="failed", error=error)
            )
    if loaded.make_edge_inputs is not None:
        checks += edge_checks(loaded, shape, device, candidates, inputs)
    return checks, timings


def edge_checks(
    loaded: LoadedGoal, shape: Shape, device: str, candidates: dict[str, Callable], usual: tuple
) -> list[Check]:
    """The goal's edge-case inputs at `shape`: the usual inputs' shapes and dtypes, a reference that holds on them, and
    every candidate within the tolerance (each as `edge:LABEL`): they must test the kernel, not the goal."""
    goal = loaded.goal
    assert loaded.make_edge_inputs is not None
    try:
        edge = _as_tuple(loaded.make_edge_inputs(shape.dims, seed_for(goal.name, shape.name), device))
        ref = loaded.reference(*edge)
        layouts = [[(t.shape, t.dtype) for t in group] for group in (usual, edge)]
        problem = _reference_problem(goal, ref) or (
            "" if layouts[0] == layouts[1] else f"edge-case inputs {layouts[1]} are not laid out as {layouts[0]}"
        )
    except Exception as exc:
        problem = f"edge-case inputs or their reference raised {type(exc).__name__}: {exc}"
    checks = [
        Check(goal=goal.name, shape=shape.name, check="edge", status="failed" if problem else "ok", error=problem)
    ]
    if problem:
        return checks
    return checks + [_run_check(goal, shape, f"edge:{label}", fn, edge, ref) for label, fn in candidates.items()]
