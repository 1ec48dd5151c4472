"""Helpers of the eval tests: where the suite lives, and evals run several at a time (no gate: evals of one
machine do not see each other)."""

from __future__ import annotations

import shutil
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

import torch
import yaml

from jg_mcp.eval import EvalOptions, EvalReport, evaluate
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import Environment
from jg_mcp.eval.report_timing import Timing
from jg_mcp.policy.check import static_check

REPO = Path(__file__).resolve().parents[2]
HACKS = REPO / "eval" / "hacks"
NATIVE = REPO / "eval" / "native"
NATIVE_HACKS: dict[str, tuple[str, set[Reason]]] = {
    "native_aten_matmul": ("gemm_bf16", {Reason.FORBIDDEN_CALL}),
    "native_cblas_sgemm": ("gemm_bf16", {Reason.FORBIDDEN_CALL}),
    "native_dlsym": ("gemm_bf16", {Reason.FORBIDDEN_CALL}),
    "native_keeps_results": ("gemm_bf16", {Reason.INCORRECT}),
}
"""C++ solutions that reach a library's kernel, look code up by name, or answer from results kept between calls."""
NATIVE_BUILDS = {"timeout_s": 400.0, "policy": "open", "whole": True, "domain_shapes": 1}
"""Options of an eval of a native solution, which builds in the candidate's import: half a minute or more on a loaded
2-core machine."""

SOLUTIONS = REPO / "eval" / "solutions"
GOALS = REPO / "goals"
CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"


def goal_forbidden(goal: str) -> list[str]:
    """A shipped goal's `forbidden:` list."""
    return yaml.safe_load((GOALS / f"{goal}.yaml").read_text())["forbidden"]


def policy_reasons(src: str, goal: str = "softmax") -> set[Reason]:
    """The reasons the static check gives `src` under a shipped goal's forbidden list."""
    return {f.reason for f in static_check(src, goal_forbidden(goal))}


def environment(device: str) -> Environment:
    """A report's environment for tests that build reports by hand."""
    gpu = device == "cuda"
    return Environment(
        device=device,
        gpu="H200" if gpu else None,
        driver="580" if gpu else None,
        torch="x",
        triton="x",
        python="x",
        jg_mcp="x",
        host="x",
        interpreter=not gpu,
    )


def timing(median: float, seen: float | None = None) -> Timing:
    """A callable's timing for tests that build reports by hand: `median` on new inputs, `seen` on seen ones."""
    return Timing(
        median_ms=median,
        iqr_ms=0.01,
        q10_ms=median,
        q90_ms=median,
        reps=50,
        rel_se_median=0.005,
        seen_median_ms=seen,
    )


def cpu_timing_goal(root: Path) -> Path:
    """The demo goal with smoke shapes big enough (1 MiB per tensor) that the timing protocol's CPU stand-in
    measures work, not microsecond noise."""
    src = REPO / "jg_mcp" / "demo_goal"
    root.mkdir(parents=True, exist_ok=True)
    text = (src / "axpy.yaml").read_text()
    text = text.replace("{name: n1000, dims: {N: 1000}}", "{name: n256k, dims: {N: 262144}}")
    text = text.replace("{name: n4099, dims: {N: 4099}}", "{name: n300k, dims: {N: 300007}}")
    (root / "axpy.yaml").write_text(text)
    shutil.copyfile(src / "axpy.py", root / "axpy.py")
    return root / "axpy.yaml"


def cpu_slow_baseline_goal(root: Path, repeats: int = 40) -> Path:
    """`cpu_timing_goal` with one baseline that computes the answer `repeats` times per call: at 1 MiB per tensor
    it takes milliseconds a call where the candidate takes a fraction of one, so a block of the candidate's has
    many more calls than the baseline's (a candidate much faster than its baselines)."""
    goal = cpu_timing_goal(root)
    text = goal.read_text()
    start = text.index("baselines:")
    end = text.index("\n", text.index("\n", start) + 1)
    slow = 'baselines:\n  repeated: {function: baseline_repeated, description: "torch.addcmul, repeated"}'
    goal.write_text(text[:start] + slow + text[end:])
    with (root / "axpy.py").open("a") as f:
        f.write(
            f"\n\ndef baseline_repeated(x, y, alpha):\n    for _ in range({repeats}):\n"
            "        z = torch.addcmul(y, x, alpha)\n    return z\n"
        )
    return goal


CPU_TIMING = {
    "device": "cpu",
    "timing_on_cpu": True,
    "domain_shapes": 0,
    "timing": {
        "budget_s": 0.5,
        "lead_ms": 5.0,
        "min_reps": 10,
        "warmup": 2,
        "seen": 4,
        "ring_bytes": 64 << 20,
        "max_block": 8,
        "seen_slack": 2.0,
    },
}
"""Options of evals that run the timing protocol on the CPU (the worker's CPU clock for the harness's events; a wider
seen-input slack for a shared 2-core machine, where the caching hacks of test_hacks_timed.py ran 37x-530x faster on
inputs they had seen). Blocks of at most 8 calls: every timed call reads a set of 1 MiB tensors the harness makes
anew from a secret seed, so a block costs the harness its calls' sets; blocks of 64 took most of a timed eval's time
here, and the protocol's checks judge a block of any size past one call."""


def eval_solution(solution: Path, goal: str | Path, root: Path, whole: bool = False, **options) -> EvalReport:
    """Copy one solution into a fresh workspace under `root` and evaluate it: its file alone, or with `whole` every
    file of its directory (a solution of several files). The suite's tables were written for the Triton-only policy,
    which is what an eval here runs under unless `policy` is given."""
    goal_path = goal if isinstance(goal, Path) else GOALS / f"{goal}.yaml"
    ws = root / f"{goal_path.stem}-{solution.parent.name}"
    if whole:
        shutil.copytree(solution.parent, ws)
    else:
        ws.mkdir(parents=True)
        shutil.copyfile(solution, ws / "solution.py")
    defaults = {"device": DEVICE, "shapes": "smoke", "domain_shapes": 1, "timeout_s": 90.0, "policy": "triton"}
    return evaluate(EvalOptions(goal=goal_path, workspace=ws, **(defaults | options)))


class Runs:
    """Evals submitted to a small pool at first use; a test waits only for the eval it asks for."""

    def __init__(self, root: Path):
        self.root = root
        self.pool = ThreadPoolExecutor(max_workers=3)
        self.futures: dict[tuple, Future] = {}

    def key(self, solution: Path, goal: str | Path, options: dict) -> tuple:
        return (str(solution), str(goal), repr(sorted(options.items())))

    def submit(self, solution: Path, goal: str | Path, **options) -> None:
        key = self.key(solution, goal, options)
        if key not in self.futures:
            where = self.root / str(len(self.futures))
            self.futures[key] = self.pool.submit(eval_solution, solution, goal, where, **options)

    def get(self, solution: Path, goal: str | Path, **options) -> EvalReport:
        self.submit(solution, goal, **options)
        return self.futures[self.key(solution, goal, options)].result()

    def wait_idle(self) -> None:
        """Wait until every eval submitted so far has finished (before one that times on the CPU)."""
        wait(list(self.futures.values()))


def load_h200_check():
    """eval/h200_check.py as a module (loading it puts eval/ on the path, as the script does)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("h200_check", REPO / "eval" / "h200_check.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def load_h200_dobench():
    """eval/h200_dobench.py, the independent measurement h200_check imports."""
    load_h200_check()
    import h200_dobench

    return h200_dobench
