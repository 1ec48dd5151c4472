"""Helpers of the eval tests: where the suite lives, and evals run several at a time."""

from __future__ import annotations

import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch

from jg_mcp.eval import EvalOptions, EvalReport, evaluate

REPO = Path(__file__).resolve().parents[2]
HACKS = REPO / "eval" / "hacks"
SOLUTIONS = REPO / "eval" / "solutions"
GOALS = REPO / "goals"
CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"


def eval_solution(solution: Path, goal: str, root: Path, **options) -> EvalReport:
    """Copy one solution into a fresh workspace under `root` and evaluate it."""
    ws = root / f"{goal}-{solution.parent.name}"
    ws.mkdir(parents=True)
    shutil.copyfile(solution, ws / "solution.py")
    defaults = {"device": DEVICE, "shapes": "smoke", "domain_shapes": 1, "timeout_s": 90.0}
    return evaluate(EvalOptions(goal=GOALS / f"{goal}.yaml", workspace=ws, **(defaults | options)))


class Runs:
    """Evals submitted to a small pool at first use; a test waits only for the eval it asks for."""

    def __init__(self, root: Path):
        self.root = root
        self.pool = ThreadPoolExecutor(max_workers=3)
        self.futures: dict[tuple, Future] = {}

    def submit(self, solution: Path, goal: str, **options) -> None:
        key = (str(solution), goal, repr(sorted(options.items())))
        if key not in self.futures:
            self.futures[key] = self.pool.submit(eval_solution, solution, goal, self.root / str(len(self.futures)), **options)

    def get(self, solution: Path, goal: str, **options) -> EvalReport:
        self.submit(solution, goal, **options)
        return self.futures[(str(solution), goal, repr(sorted(options.items())))].result()
