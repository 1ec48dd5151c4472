"""Scoring: speedups against the strongest baseline, and the timing findings (escape, floor, seen inputs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_suite import environment, timing

from jg_mcp.eval.options import TimingParams
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import EvalReport, ShapeResult
from jg_mcp.eval.report_timing import Timing
from jg_mcp.eval.scoring import score
from jg_mcp.goals import load_goal

GOAL = Path(__file__).resolve().parents[2] / "goals" / "gemm_bf16.yaml"


def _scored(cand: Timing, baselines: dict[str, Timing], **margins: float) -> EvalReport:
    goal = load_goal(GOAL)
    timed = goal.goal.shapes[0]
    env = environment("cuda")
    shape = ShapeResult(
        name=timed.name, kind="timed", dims=timed.dims, trials=3, correct=True, candidate=cand, baselines=baselines
    )
    report = EvalReport(
        goal=goal.name,
        goal_sha256="0" * 64,
        solution_sha256="1" * 64,
        solution_file="s.py",
        accepted=True,
        seed=1,
        environment=env,
        shapes=[shape],
    )
    score(goal, report, TimingParams(**margins))
    return report


def test_speedup_is_against_the_strongest_baseline():
    report = _scored(timing(10.0), {"slow": timing(30.0), "fast": timing(12.0)})
    assert report.geomean_speedup == pytest.approx(1.2)
    assert report.strongest_baseline == {report.shapes[0].name: "fast"} and report.findings == []


def test_a_candidate_much_faster_on_inputs_it_has_seen_is_caching():
    report = _scored(timing(25.0, seen=10.0), {"torch": timing(12.3, seen=12.0)})
    assert [f.reason for f in report.findings] == [Reason.CACHED_OUTPUT]
    detail = report.findings[0].detail
    assert "had seen" in detail and "25.0" in detail and "keeps results" in detail


def test_speed_on_seen_inputs_the_baselines_share_is_not_blamed_on_the_candidate():
    report = _scored(timing(13.5, seen=10.0), {"torch": timing(15.6, seen=12.0)})
    assert report.findings == []


def test_noise_between_new_and_seen_inputs_is_tolerated():
    assert _scored(timing(11.5, seen=10.0), {"torch": timing(12.0, seen=12.0)}).findings == []


def test_the_seen_input_slack_is_the_eval_option_s():
    """The CPU stand-in of the tests times blocks on a shared 2-core machine: its evals pass a wider slack."""
    noisy = (timing(18.0, seen=10.0), {"torch": timing(12.0, seen=12.0)})
    assert [f.reason for f in _scored(*noisy).findings] == [Reason.CACHED_OUTPUT]
    assert _scored(*noisy, seen_slack=2.0).findings == []
    caching = _scored(timing(25.0, seen=10.0), noisy[1], seen_slack=2.0)
    assert [f.reason for f in caching.findings] == [Reason.CACHED_OUTPUT]
    with pytest.raises(ValueError, match="seen_slack"):
        TimingParams(seen_slack=1.0)


def test_a_time_below_the_physical_floor_is_a_finding():
    report = _scored(timing(1e-6), {"torch": timing(12.0)})
    assert Reason.BELOW_FLOOR in report.reasons


def test_the_timing_parameters_are_stored_whole_and_older_flat_ones_are_read_into_them():
    from jg_mcp.eval.report_timing import TimingMethod

    method = TimingMethod(params=TimingParams(lead_ms=30.0))
    assert TimingMethod.model_validate(method.model_dump(mode="json")) == method
    old = {"input_sets": 3, "warmup_calls": 2, "min_reps": 20, "fresh_sets": 5, "l2_flush_bytes": 1 << 28, "sync_ms": 0}
    params = TimingMethod.model_validate(old).params
    assert params is not None and (params.input_sets, params.warmup, params.min_reps) == (3, 2, 20)
    gone = {"fresh": 5, "fresh_slack": 1.3, "graph_bytes": 1, "graph_replays": 3}
    v12 = {"params": TimingParams().model_dump() | gone}
    assert TimingMethod.model_validate(v12).params == TimingParams(), "version 12's parameters that no longer exist"
    skipped = {"skipped": "no CUDA device", "input_sets": 0, "min_reps": 0}
    assert TimingMethod.model_validate(skipped).params is None
