"""The known-good set: every solution in eval/solutions/ is accepted by the eval of its goal."""

from __future__ import annotations

import pytest
from eval_suite import GOALS, SOLUTIONS

KNOWN_GOOD = sorted(
    p.parent.name for p in SOLUTIONS.glob("*/solution.py") if (GOALS / f"{p.parent.name}.yaml").is_file()
)


@pytest.fixture(scope="module")
def suite(runs):
    """Start every known-good eval at once; each test then waits for its own."""
    for goal in KNOWN_GOOD:
        runs.submit(SOLUTIONS / goal / "solution.py", goal)
    return runs


def test_the_known_good_set_is_not_empty():
    assert "gemm_fp8" in KNOWN_GOOD


@pytest.mark.parametrize("goal", KNOWN_GOOD)
def test_known_good_solution_is_accepted(suite, goal):
    report = suite.get(SOLUTIONS / goal / "solution.py", goal)
    assert report.accepted, f"{goal}: {report.reasons}: {[f.detail for f in report.findings][:5]}"
    assert all(s.correct and s.trials >= 3 for s in report.shapes)
    assert {s.kind for s in report.shapes} >= {"smoke", "domain"}
