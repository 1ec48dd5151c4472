"""The known-good set: every solution in eval/solutions/ is accepted by the eval of its goal."""

from __future__ import annotations

import pytest
from eval_suite import DEVICE, GOALS, SOLUTIONS

from jg_mcp.eval.correctness import EDGE_KINDS, EXTREME_TRIALS
from jg_mcp.goals import find_goal, load_goal

pytestmark = pytest.mark.slow

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
    assert all(s.correct for s in report.shapes)
    few = {"extreme"} | ({"top"} if DEVICE == "cpu" else set())  # each trial there costs seconds
    edge = int(load_goal(find_goal(goal)).goal.edge_inputs is not None)  # one more trial on edge-case inputs
    expected = [EXTREME_TRIALS if s.kind in few else 3 + edge * (s.kind in EDGE_KINDS) for s in report.shapes]
    assert [s.trials for s in report.shapes] == expected
    assert {s.kind for s in report.shapes} >= {"smoke", "domain"}


def test_a_known_good_solution_with_a_self_test_under_the_main_guard_is_accepted_and_the_report_says_what_it_skipped(
    tmp_path,
):
    """Agents write self-tests that call the library op under `if __name__ == "__main__":`; the eval never runs that
    block, judges the rest, and its report (JSON and Markdown) names the block it did not judge."""
    from eval_suite import eval_solution

    from jg_mcp.eval.report_md import markdown

    text = (SOLUTIONS / "softmax" / "solution.py").read_text()
    test = '\n\nif __name__ == "__main__":\n    x = torch.randn(4, 300)\n'
    test += "    print((kernel(x) - torch.softmax(x, -1)).abs().max())\n"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "solution.py").write_text(text + test)
    report = eval_solution(tmp_path / "src" / "solution.py", GOALS / "softmax.yaml", tmp_path / "runs", device="cpu")
    assert report.accepted, [f.detail for f in report.findings]
    (note,) = report.notes
    assert "__main__" in note and "not judged" in note and "## Notes (not judged)" in markdown(report)
