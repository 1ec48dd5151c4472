"""Helpers of the eval tests: where the suite lives, and evals run several at a time."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import torch

from jg_mcp.eval import EvalOptions, EvalReport, evaluate
from jg_mcp.eval.report import Environment

REPO = Path(__file__).resolve().parents[2]
HACKS = REPO / "eval" / "hacks"
SOLUTIONS = REPO / "eval" / "solutions"
GOALS = REPO / "goals"
CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"


def environment(device: str) -> Environment:
    """A report's environment for tests that build reports by hand."""
    gpu = device == "cuda"
    return Environment(device=device, gpu="H200" if gpu else None, driver="580" if gpu else None, torch="x",
                       triton="x", python="x", jg_mcp="x", host="x", interpreter=not gpu)


def eval_solution(solution: Path, goal: str, root: Path, **options) -> EvalReport:
    """Copy one solution into a fresh workspace under `root` and evaluate it."""
    ws = root / f"{goal}-{solution.parent.name}"
    ws.mkdir(parents=True)
    shutil.copyfile(solution, ws / "solution.py")
    defaults = {"device": DEVICE, "shapes": "smoke", "domain_shapes": 1, "timeout_s": 90.0}
    return evaluate(EvalOptions(goal=GOALS / f"{goal}.yaml", workspace=ws, **(defaults | options)))


class Gate:
    """Evals share the machine, except those that write shared places (/dev/shm), which run alone."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.shared = 0
        self.alone = False
        self.waiting = 0

    @contextmanager
    def hold(self, alone: bool) -> Iterator[None]:
        with self.cond:
            if alone:
                self.waiting += 1
                self.cond.wait_for(lambda: not self.alone and self.shared == 0)
                self.waiting -= 1
                self.alone = True
            else:
                self.cond.wait_for(lambda: not self.alone and not self.waiting)
                self.shared += 1
        try:
            yield
        finally:
            with self.cond:
                if alone:
                    self.alone = False
                else:
                    self.shared -= 1
                self.cond.notify_all()


class Runs:
    """Evals submitted to a small pool at first use; a test waits only for the eval it asks for."""

    def __init__(self, root: Path):
        self.root = root
        self.pool = ThreadPoolExecutor(max_workers=3)
        self.futures: dict[tuple, Future] = {}
        self.gate = Gate()

    def _run(self, alone: bool, *args, **options) -> EvalReport:
        with self.gate.hold(alone):
            return eval_solution(*args, **options)

    def submit(self, solution: Path, goal: str, alone: bool = False, **options) -> None:
        """Start an eval; `alone` keeps every other eval off the machine while it runs."""
        key = (str(solution), goal, repr(sorted(options.items())))
        if key not in self.futures:
            where = self.root / str(len(self.futures))
            self.futures[key] = self.pool.submit(self._run, alone, solution, goal, where, **options)

    def get(self, solution: Path, goal: str, alone: bool = False, **options) -> EvalReport:
        self.submit(solution, goal, alone, **options)
        return self.futures[(str(solution), goal, repr(sorted(options.items())))].result()
