"""The campaign table from hand-built run records: only accepted runs count, medians, geomean across goals."""

from __future__ import annotations

import pytest

from jg_mcp.campaign import table
from jg_mcp.campaign.budget import Budget
from jg_mcp.campaign.run_record import EvalSummary, RunRecord, RunSpec


def record(
    agent: str,
    goal: str,
    condition: str,
    seed: int,
    status: str,
    speedup: float | None = None,
    roofline: float | None = None,
    reasons: tuple[str, ...] = (),
    exit_reason: str = "agent exited (code 0)",
):
    return RunRecord(
        run_id=f"{agent}__{goal}__{condition}__s{seed}",
        spec=RunSpec(agent="scripted", goal=goal),
        agent="scripted",
        condition=condition,
        goal=goal,
        goal_sha256="0" * 64,
        budget=Budget(wall_clock_minutes=10),
        server_argv=[],
        started_at="",
        exit_reason=exit_reason,
        eval=EvalSummary(status=status, reasons=list(reasons), geomean_speedup=speedup, roofline_pct=roofline),
    )


RECORDS = [
    record("claude", "gemm", "goal-only", 0, "accepted", 2.0, 50.0),
    record("claude", "gemm", "goal-only", 1, "accepted", 4.0, 70.0),
    record("claude", "gemm", "goal-only", 2, "rejected", None, None, ("wrong_output",)),
    record("claude", "norm", "goal-only", 0, "accepted", 2.0, 80.0),
    record("claude", "norm", "eval-tool", 0, "no solution", exit_reason="budget spent: 10 minutes; agent stopped"),
    record("codex", "gemm", "goal-only", 0, "rejected", 9.0, None, ("forbidden_api",)),
]


def test_only_accepted_runs_count_with_best_median_and_geomean_across_goals():
    t = table.build(RECORDS)
    assert t.agents == ["claude", "codex"] and t.conditions == ["goal-only", "eval-tool"]
    gemm = t.cell("claude", "gemm", "goal-only")
    assert (gemm.runs, gemm.accepted, gemm.best_speedup, gemm.median_speedup) == (3, 2, 4.0, 3.0)
    assert gemm.median_roofline_pct == 60.0 and gemm.rejections == {"wrong_output": 1}
    codex = t.cell("codex", "gemm", "goal-only")
    assert codex.accepted == 0 and codex.best_speedup is None, "a rejected run's speedup counts for nothing"
    assert t.geomean["claude"]["goal-only"] == pytest.approx((3.0 * 2.0) ** 0.5)
    assert t.geomean["claude"]["eval-tool"] is None and t.geomean["codex"]["goal-only"] is None


def test_markdown_csv_and_html_show_the_same_numbers_and_the_reasons():
    t = table.build(RECORDS)
    md = table.markdown(t)
    assert "| gemm | goal-only | 2/3 | 4.00x | 3.00x | 60.00% | 0/1 | - | - | - |" in md
    assert "| geomean | goal-only |  |  | 2.45x |  |  |  | - |  |" in md
    assert "- claude / norm / eval-tool: 1x no solution (budget spent: 10 minutes)" in md
    assert "- codex / gemm / goal-only: 1x forbidden_api" in md
    csv_text = table.to_csv(t)
    assert "claude,gemm,goal-only,3,2,4.0,3.0,60.0,1x wrong_output" in csv_text.splitlines()
    page = table.to_html(t)
    assert page.count("<svg") == 1 and "median verified speedup (x)" in page
    assert "<title>claude: 3</title>" in page and "codex / gemm / goal-only: 1x forbidden_api" in page
