"""Goal validation: every input depends on the seed, the reference agrees with every baseline shape by shape,
and the shipped solution passes the eval itself; on a GPU with every timed shape, the baselines are timed too.

Baselines are trusted harness code and run here. The solution is untrusted like any agent's: `jg_mcp.eval`
runs it in its own (sandboxed) process, under the Triton interpreter on the CPU, and its report becomes rows.
"""

from __future__ import annotations

import inspect
import math
import platform
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel

from jg_mcp import __version__, log
from jg_mcp.eval import EvalOptions, EvalReport, evaluate
from jg_mcp.eval.checks import measure
from jg_mcp.eval.report import ErrorStats, Finding
from jg_mcp.goals import Goal, LoadedGoal, Shape, Tolerance, load_goal

logger = log.get("jg_mcp.validate")

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "eval" / "solutions"
WARMUP_MS = 25
REP_MS = 100
QUANTILES = (0.5, 0.2, 0.8)


class Check(BaseModel):
    goal: str
    shape: str
    check: str
    """`inputs` (shape `*`: every input depends on the seed), `reference`, `baseline:NAME`, `timing:baseline:NAME`,
    `solution` (on a GPU) or `solution:interpreted`."""
    status: Literal["ok", "failed", "skipped"]
    max_abs_err: float | None = None
    """Largest |out - ref| over the finite elements of all outputs."""
    worst_ratio: float | None = None
    """Largest |out - ref| / (atol + rtol * |ref|) over all outputs, inf for a NaN or inf.

    Above 1 is out of tolerance."""
    error: str = ""
    """Why it failed or was skipped."""


class Timing(BaseModel):
    goal: str
    shape: str
    baseline: str
    median_ms: float
    p20_ms: float
    p80_ms: float
    tflops: float
    tbps: float
    pct_peak_flops: float
    pct_peak_bandwidth: float
    pct_roofline: float
    """Time the goal's roofline allows (the larger of flops/peak and bytes/bandwidth) over the median, in %."""


class Report(BaseModel):
    device: str
    full: bool
    environment: dict[str, Any]
    method: dict[str, Any]
    wall_seconds: float
    checks: list[Check]
    timings: list[Timing]

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "failed"]


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


def _time(loaded: LoadedGoal, shape: Shape, name: str, fn: Callable, inputs: tuple) -> Timing:
    import triton.testing

    median, p20, p80 = triton.testing.do_bench(
        lambda: fn(*inputs), warmup=WARMUP_MS, rep=REP_MS, quantiles=list(QUANTILES)
    )
    hw = loaded.goal.hardware
    flops, nbytes, seconds = loaded.flops(shape.dims), loaded.bytes(shape.dims), median * 1e-3
    floor = max(flops / (hw.peak_tflops * 1e12), nbytes / (hw.peak_bandwidth_tbps * 1e12))
    return Timing(
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
) -> tuple[list[Check], list[Timing]]:
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
    timings: list[Timing] = []
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
    return checks, timings


def _detail(f: Finding) -> str:
    """A finding on one line: its reason and the last lines of its detail (a traceback ends with the error)."""
    return f"{f.reason}: {' | '.join(line.strip() for line in f.detail.strip().splitlines()[-3:])}"


def _ratio(e: ErrorStats, tol: Tolerance) -> float:
    """|out - ref| / (atol + rtol |ref|) at the output's worst element: inf for a NaN, inf or poison there."""
    diff = abs(e.worst_value - e.worst_reference)
    return diff / (tol.atol + tol.rtol * abs(e.worst_reference)) if math.isfinite(diff) else math.inf


def report_checks(goal: Goal, report: EvalReport, label: str) -> list[Check]:
    """The eval's verdict as rows: one failed row per finding tied to no shape (static policy, import, a dead
    process), then one row per shape, failed with that shape's findings; shapes never run are skipped."""
    names = {s.name for s in report.shapes}
    checks = [
        Check(goal=goal.name, shape="*", check=label, status="failed", error=_detail(f))
        for f in report.findings
        if f.shape not in names
    ]
    for s in report.shapes:
        found = [_detail(f) for f in report.findings if f.shape == s.name]
        status: Literal["ok", "failed", "skipped"] = "failed" if found else "ok" if s.correct else "skipped"
        checks.append(
            Check(
                goal=goal.name,
                shape=s.name,
                check=label,
                status=status,
                max_abs_err=max((e.max_abs for e in s.errors), default=None),
                worst_ratio=max((_ratio(e, goal.tolerance) for e in s.errors), default=None),
                error="; ".join(found) if found else "" if s.correct else "not run: the candidate stopped earlier",
            )
        )
    return checks


def solution_checks(loaded: LoadedGoal, folder: Path, device: str, full: bool) -> list[Check]:
    """The solution in `folder` through `jg_mcp.eval.evaluate` at the shapes the baselines are checked at (one
    trial each, no drawn shapes; on a GPU with --full it is timed against the baselines as in any eval)."""
    goal = loaded.goal
    label = "solution" if device == "cuda" else "solution:interpreted"
    if not (folder / goal.solution.file).is_file():
        error = f"no {folder / goal.solution.file}"
        return [Check(goal=goal.name, shape="*", check="solution", status="skipped", error=error)]
    options = EvalOptions(
        goal=loaded.yaml_path,
        workspace=folder,
        shapes="timed" if full else "smoke",
        device="cuda" if device == "cuda" else "cpu",
        trials=1,
        domain_shapes=0,
    )
    try:
        report = evaluate(options)
    except Exception as exc:  # the eval could not run this goal (a reference that raises): the goal's failure
        error = f"the eval raised {type(exc).__name__}: {exc}"
        return [Check(goal=goal.name, shape="*", check=label, status="failed", error=error)]
    return report_checks(goal, report, label)


def validate_goal(
    loaded: LoadedGoal, device: str, full: bool, solutions: Path = SOLUTIONS
) -> tuple[list[Check], list[Timing]]:
    goal = loaded.goal
    baselines: dict[str, Callable] = {
        f"baseline:{name}": loaded.baseline(name) for name, b in goal.baselines.items() if device in b.devices
    }
    timed = set(baselines) if device == "cuda" and full else set()
    checks = input_checks(loaded, device)
    timings: list[Timing] = []
    for shape in goal.shapes if full else goal.smoke_shapes:
        logger.info("checking", goal=goal.name, shape=shape.name, device=device, baselines=len(baselines))
        shape_checks, shape_timings = check_shape(loaded, shape, device, baselines, timed)
        checks += shape_checks
        timings += shape_timings
        if device == "cuda":
            torch.cuda.empty_cache()
    logger.info("evaluating the solution", goal=goal.name, device=device)
    checks += solution_checks(loaded, solutions / goal.name, device, full)
    return checks, timings


def environment(device: str) -> dict[str, Any]:
    import triton

    env: dict[str, Any] = {
        "jg_mcp": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda_runtime": torch.version.cuda,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "host": platform.node(),
    }
    if device == "cuda":
        from jg_mcp.gpu import query_gpu

        gpu = query_gpu()
        env |= {
            "gpu": torch.cuda.get_device_name(),
            "driver": gpu.driver_version,
            "cuda_driver": gpu.cuda_driver_version,
            "nvml": gpu.model_dump(),
        }
    return env


def run(
    paths: list[Path],
    device: str,
    full: bool,
    solutions: Path = SOLUTIONS,
    emit: Callable[[str], None] = print,
    save: Callable[[Report], None] | None = None,
) -> Report:
    """Validate every goal in `paths`, emitting one line per check and timing as it goes, and handing
    the report so far to `save` after each goal (a run cut short keeps what it finished)."""
    started = time.monotonic()
    method = {
        "timer": "triton.testing.do_bench (CUDA events, L2 flushed between repetitions)",
        "warmup_ms": WARMUP_MS,
        "rep_ms": REP_MS,
        "quantiles": list(QUANTILES),
        "seed": "crc32 of 'goal/shape'; the inputs check adds crc32 of 'goal/shape/second'",
    }
    report = Report(
        device=device, full=full, environment=environment(device), method=method, wall_seconds=0, checks=[], timings=[]
    )
    for path in paths:
        checks, timings = validate_goal(load_goal(path), device, full, solutions)
        for c in checks:
            emit(check_line(c))
        for t in timings:
            emit(timing_line(t))
        report.checks += checks
        report.timings += timings
        report.wall_seconds = time.monotonic() - started
        if save:
            save(report)
    return report


def check_line(c: Check) -> str:
    err = (
        ""
        if c.max_abs_err is None or c.worst_ratio is None
        else f" max_abs_err={c.max_abs_err:.3g} max_err/tol={c.worst_ratio:.3g}"
    )
    why = f"  {c.error}" if c.error else ""
    return f"{c.status:8s}{c.goal:20s} {c.shape:44s} {c.check:24s}{err}{why}".rstrip()


def timing_line(t: Timing) -> str:
    return (
        f"{'time':8s}{t.goal:20s} {t.shape:44s} {t.baseline:24s} median {t.median_ms:.4f} ms "
        f"[{t.p20_ms:.4f}, {t.p80_ms:.4f}] {t.tflops:.1f} TFLOP/s {t.tbps:.2f} TB/s roofline {t.pct_roofline:.0f}%"
    )


def markdown(report: Report) -> str:
    """The baseline timings as a Markdown table, with the environment and the method."""
    env = report.environment
    ok = sum(c.status == "ok" for c in report.checks)
    lines = [
        f"# Baseline timings on {env.get('gpu', report.device)}",
        "",
        f"torch {env['torch']}, triton {env['triton']}, CUDA runtime {env['cuda_runtime']}, "
        f"driver {env.get('driver')} (CUDA {env.get('cuda_driver')}), python {env['python']}, jg-mcp {env['jg_mcp']}.",
        "",
        f"Timer: {report.method['timer']}, warmup {report.method['warmup_ms']} ms, rep {report.method['rep_ms']} ms; "
        "p20/p80 give the spread. % peak is against the goal's declared hardware peaks; roofline is the larger "
        "of flops/peak and bytes/bandwidth over the median.",
        "",
        f"Correctness: {ok} of {len(report.checks)} checks passed ({len(report.failures)} failed); "
        f"the whole validation took {report.wall_seconds:.0f} s.",
        "",
        "| goal | shape | baseline | median ms | p20-p80 ms | TFLOP/s | TB/s "
        "| % peak FLOP/s | % peak BW | % roofline |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for t in report.timings:
        lines.append(
            f"| {t.goal} | {t.shape} | {t.baseline} | {t.median_ms:.4f} | {t.p20_ms:.4f}-{t.p80_ms:.4f} | "
            f"{t.tflops:.1f} | {t.tbps:.2f} | {t.pct_peak_flops:.1f} | {t.pct_peak_bandwidth:.1f} "
            f"| {t.pct_roofline:.1f} |"
        )
    return "\n".join(lines) + "\n"
