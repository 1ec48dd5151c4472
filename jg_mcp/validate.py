"""Goal validation: every input depends on the seed, the reference agrees with every baseline shape by shape,
and the shipped solution passes the eval itself; on a GPU with every timed shape, the baselines are timed too.

Baselines are trusted harness code and run here (jg_mcp.validate_harness). The solution is untrusted like any
agent's: `jg_mcp.eval` runs it in its own (sandboxed) process, under the Triton interpreter on the CPU, and its
report becomes rows (jg_mcp.validate_solution). The rows are jg_mcp.validate_report's; this module runs the
validation goal by goal and writes its lines and its Markdown table.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from jg_mcp import __version__, log
from jg_mcp.goals import LoadedGoal, load_goal
from jg_mcp.validate_harness import QUANTILES, REP_MS, WARMUP_MS, check_shape, input_checks
from jg_mcp.validate_report import BaselineTiming, Check, Report
from jg_mcp.validate_solution import solution_checks

logger = log.get("jg_mcp.validate")

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "eval" / "solutions"


def validate_goal(
    loaded: LoadedGoal, device: str, full: bool, solutions: Path = SOLUTIONS
) -> tuple[list[Check], list[BaselineTiming]]:
    goal = loaded.goal
    baselines: dict[str, Callable] = {
        f"baseline:{name}": loaded.baseline(name) for name, b in goal.baselines.items() if device in b.devices
    }
    timed = set(baselines) if device == "cuda" and full else set()
    checks = input_checks(loaded, device)
    timings: list[BaselineTiming] = []
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


def timing_line(t: BaselineTiming) -> str:
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
