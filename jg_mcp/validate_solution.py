"""The validation of a goal's shipped solution: untrusted like any agent's, so `jg_mcp.eval` runs it in its own
(sandboxed) process, under the Triton interpreter on the CPU, and its report becomes rows (report_checks).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from jg_mcp.eval import EvalOptions, EvalReport, evaluate
from jg_mcp.eval.report import ErrorStats, Finding
from jg_mcp.goals import Goal, LoadedGoal, Tolerance
from jg_mcp.validate_report import Check


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
