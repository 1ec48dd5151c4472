"""Goal validation: the reference against every baseline and the shipped solution, shape by shape;
on a GPU with every timed shape, the baselines timed too.

On the CPU the shipped solution runs under the Triton interpreter in a child process
(`python -m jg_mcp.validate GOAL SOLUTION ...`), so TRITON_INTERPRET never touches this process.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel

from jg_mcp import __version__, log
from jg_mcp.eval.checks import measure
from jg_mcp.goals import Goal, LoadedGoal, Shape, load_goal

logger = log.get("jg_mcp.validate")

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "eval" / "solutions"
WARMUP_MS = 25
REP_MS = 100
QUANTILES = (0.5, 0.2, 0.8)
CHILD_TIMEOUT_S = 900


class Check(BaseModel):
    goal: str
    shape: str
    check: str
    """`reference`, `baseline:NAME`, `solution` (compiled) or `solution:interpreted`."""
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


def import_solution(path: Path, function: str) -> Callable:
    spec = importlib.util.spec_from_file_location(f"jg_solution_{path.parent.name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, function)


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


def interpreted_solution_checks(loaded: LoadedGoal, solution: Path, full: bool) -> list[Check]:
    """Run the solution under TRITON_INTERPRET=1 on the CPU in a child process; one Check per shape."""
    env = dict(
        os.environ,
        TRITON_INTERPRET="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    cmd = [sys.executable, "-m", "jg_mcp.validate", str(loaded.yaml_path), str(solution)] + (["--full"] if full else [])
    label = "solution:interpreted"
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return [
            Check(
                goal=loaded.name, shape="*", check=label, status="failed", error=f"timed out after {CHILD_TIMEOUT_S} s"
            )
        ]
    checks = [Check.model_validate_json(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    shapes = loaded.goal.shapes if full else loaded.goal.smoke_shapes
    done = sum(c.check == label for c in checks)
    if proc.returncode != 0 or done != len(shapes):
        tail = proc.stderr.strip().splitlines()[-3:]
        error = f"child exited {proc.returncode} after {done} of {len(shapes)} shapes: {' | '.join(tail)}"
        checks.append(Check(goal=loaded.name, shape="*", check=label, status="failed", error=error))
    return checks


def validate_goal(
    loaded: LoadedGoal, device: str, full: bool, solutions: Path = SOLUTIONS
) -> tuple[list[Check], list[Timing]]:
    goal = loaded.goal
    candidates: dict[str, Callable] = {
        f"baseline:{name}": loaded.baseline(name) for name, b in goal.baselines.items() if device in b.devices
    }
    timed = set(candidates) if device == "cuda" and full else set()
    solution = solutions / goal.name / goal.solution.file
    checks: list[Check] = []
    if not solution.is_file():
        checks.append(Check(goal=goal.name, shape="*", check="solution", status="skipped", error=f"no {solution}"))
    elif device == "cuda":
        try:
            candidates["solution"] = import_solution(solution, goal.solution.function)
        except Exception as exc:
            checks.append(
                Check(
                    goal=goal.name,
                    shape="*",
                    check="solution",
                    status="failed",
                    error=f"import failed: {type(exc).__name__}: {exc}",
                )
            )
    timings: list[Timing] = []
    for shape in goal.shapes if full else goal.smoke_shapes:
        logger.info("checking", goal=goal.name, shape=shape.name, device=device, candidates=len(candidates))
        shape_checks, shape_timings = check_shape(loaded, shape, device, candidates, timed)
        checks += shape_checks
        timings += shape_timings
        if device == "cuda":
            torch.cuda.empty_cache()
    if solution.is_file() and device == "cpu":
        checks += interpreted_solution_checks(loaded, solution, full)
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
        "seed": "crc32 of 'goal/shape'",
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


def _child_main(argv: list[str]) -> int:
    """Child process: check a solution at a goal's smoke (or timed) shapes on the CPU, one JSON line each."""
    p = argparse.ArgumentParser(prog="python -m jg_mcp.validate")
    p.add_argument("goal", type=Path)
    p.add_argument("solution", type=Path)
    p.add_argument("--full", action="store_true")
    args = p.parse_args(argv)
    loaded = load_goal(args.goal)
    fn = import_solution(args.solution, loaded.goal.solution.function)
    for shape in loaded.goal.shapes if args.full else loaded.goal.smoke_shapes:
        checks, _ = check_shape(loaded, shape, "cpu", {"solution:interpreted": fn}, set())
        for c in checks:
            if c.check != "reference" or c.status == "failed":
                print(c.model_dump_json(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
