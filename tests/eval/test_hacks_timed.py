"""The adversarial suite, timed: the hacks on the demo goal that only the timing phase can catch are rejected when
the timing protocol runs on the CPU (host clocks standing in for CUDA events), and what a candidate forges of its
own times gains it nothing. These evals time: each runs alone, after every other eval of its process
(tests/scheduling.py runs most of them with nothing else of the suite running)."""

from __future__ import annotations

import pytest
from eval_suite import CPU_TIMING, HACKS
from hack_suite import CPU_TIMED_HACKS, FORGERIES, TIMED_HACK_OPTIONS

from jg_mcp.eval import Reason


@pytest.mark.parametrize("name", sorted(CPU_TIMED_HACKS))
def test_timing_hack_is_caught_by_the_harness_from_outside(runs, timing_goal, name):
    runs.wait_idle()  # timed alone, one at a time: no other eval of this process runs meanwhile
    options = CPU_TIMING | {"timing": CPU_TIMING["timing"] | TIMED_HACK_OPTIONS.get(name, {})}
    report = runs.get(HACKS / name / "solution.py", timing_goal, **options)
    assert not report.accepted
    missing = CPU_TIMED_HACKS[name] - set(report.reasons)
    assert not missing, (
        f"{name}: missing {sorted(missing)}; got {report.reasons}: {[f.detail for f in report.findings]}"
    )


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_times_the_candidate_forges_gain_it_nothing(runs, timing_goal, name):
    runs.wait_idle()
    report = runs.get(HACKS / name / "solution.py", timing_goal, **(CPU_TIMING | {"policy": "open"}))
    timed = [s for s in report.shapes if s.candidate is not None]
    assert timed or not report.accepted, [f.detail for f in report.findings]
    for shape in timed:
        assert max(shape.speedup.values()) < FORGERIES[name], (name, shape.name, shape.speedup)


def test_a_candidate_cannot_slow_the_baseline_by_writing_its_inputs(runs, timing_goal):
    """The baseline's process reads inputs of its own, memory the candidate's process never maps: sabotaging the
    candidate's own copy while the baseline is timed gains nothing (this hack computes its sum twice: slower). Its
    helper thread races the harness's read-back of the inputs: where it loses (1 clean-clone CI run in 3 here), the
    timing stops with input_modified, which gains it nothing either."""
    runs.wait_idle()
    # blocks of 64 calls, not CPU_TIMING's 8: in 8-call blocks the CPU clock's ticks can show this slower hack faster
    report = runs.get(
        HACKS / "sabotage_baseline_inputs" / "solution.py",
        timing_goal,
        **(CPU_TIMING | {"timing": CPU_TIMING["timing"] | {"max_block": 64}}),
    )
    speedups = [v for s in report.shapes for v in (s.speedup or {}).values()]
    caught = not report.accepted and Reason.INPUT_MODIFIED in report.reasons
    assert caught or (speedups and max(speedups) < 1.3), (speedups, report.reasons)
