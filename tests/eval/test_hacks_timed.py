"""The adversarial suite, timed: the hacks on the demo goal that only the timing phase can catch are rejected when
the timing protocol runs on the CPU (host clocks standing in for CUDA events), and what a candidate forges of its
own times gains it nothing. These evals time: each runs alone, after every other eval of its process
(tests/scheduling.py runs most of them with nothing else of the suite running)."""

from __future__ import annotations

import pytest
from eval_suite import CPU_TIMING, HACKS
from hack_suite import CPU_TIMED_HACKS, FORGERIES, TIMED_HACK_OPTIONS

from jg_mcp.eval import Reason

OWN_TEST = {"skip_calls_past_the_baselines"}
"""Hacks of CPU_TIMED_HACKS that need a goal of their own, each run by a test below."""


@pytest.mark.parametrize("name", sorted(CPU_TIMED_HACKS.keys() - OWN_TEST))
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


def test_calls_past_the_baselines_count_are_compared_too(runs, tmp_path):
    """A candidate much faster than its one baseline (`cpu_slow_baseline_goal`: a block of the baseline's is a call
    or two, the candidate's eight) computes the first call of each block and skips the rest: only a baseline block
    on those calls' inputs, after the round, gives them something to be compared with. No call judged at random,
    no seen-input blocks, no leads (the hack would take a lead and its timed block for one)."""
    from eval_suite import cpu_slow_baseline_goal

    runs.wait_idle()
    goal = cpu_slow_baseline_goal(tmp_path / "goal")
    hack = "skip_calls_past_the_baselines"
    quiet = TIMED_HACK_OPTIONS[hack] | {"lead_ms": 0.0, "block_ms": 5.0}
    options = CPU_TIMING | {"policy": "open", "timing": CPU_TIMING["timing"] | quiet}  # it reads `time`
    report = runs.get(HACKS / hack / "solution.py", goal, **options)
    missing = CPU_TIMED_HACKS[hack] - set(report.reasons)
    assert not report.accepted and not missing, [f.detail for f in report.findings]
    timed = [s for s in report.shapes if s.candidate is not None]
    assert timed and all(s.baselines["repeated"].block < s.candidate.block for s in timed), [
        (s.name, s.candidate and s.candidate.block) for s in report.shapes
    ]
    calls = [int(f.detail.split()[2]) for f in report.findings if "when its clock stopped" in f.detail]
    assert calls and max(calls) > max(s.baselines["repeated"].block for s in timed), calls
