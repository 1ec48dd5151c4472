"""The adversarial suite, caught from outside: every known hack in eval/hacks/ that the CPU can catch while it runs
is rejected under the open policy (the default) for the reasons the harness finds from outside the candidate's
process (its own buffers, its own clock, the processes left behind), whatever its source says. The tables:
hack_suite.py."""

from __future__ import annotations

import pytest
from eval_suite import HACKS, NATIVE_HACKS
from hack_suite import (
    ACCEPTED_ON_CPU,
    CPU_HACKS,
    CPU_TIMED_HACKS,
    GEMM,
    GPU_HACKS,
    OPEN_ALLOWED,
    TIMEOUTS,
    assert_rejected_for_its_reasons,
    by_source,
    cpu_options,
    expected,
    submit_cpu_hacks,
)

from jg_mcp.eval import Reason

CAUGHT_RUNNING = sorted(n for n in set(CPU_HACKS) - set(OPEN_ALLOWED) if not by_source(n, "open"))
"""The hacks of CPU_HACKS whose rejection under the open policy rests on what the candidate did while it ran."""


@pytest.fixture(scope="module")
def cpu_suite(runs):
    return submit_cpu_hacks(runs, CAUGHT_RUNNING, "open")


def test_every_hack_caught_running_has_reasons_it_must_be_rejected_for():
    """A rejection for no named reason would pass a hack that only crashed or timed out."""
    assert [n for n in CAUGHT_RUNNING if not expected(n, "open")] == []


def test_every_hack_directory_is_in_the_suite():
    listed = set(CPU_HACKS) | set(CPU_TIMED_HACKS) | set(GPU_HACKS) | set(NATIVE_HACKS)
    assert {p.parent.name for p in HACKS.glob("*/solution.py")} == listed
    assert ACCEPTED_ON_CPU <= set(GPU_HACKS) and set(OPEN_ALLOWED) <= set(CPU_HACKS)


def test_the_gpu_checks_timing_for_a_hack_names_a_gpu_hack_and_parameters_that_exist():
    from eval_suite import load_h200_check

    from jg_mcp.eval.options import TimingParams

    check = load_h200_check()
    assert check.HACK_TIMING and set(check.HACK_TIMING) <= set(GPU_HACKS)
    for options in check.HACK_TIMING.values():
        TimingParams(**options)


@pytest.mark.parametrize("name", CAUGHT_RUNNING)
def test_hack_is_rejected_for_its_reason(cpu_suite, name):
    assert_rejected_for_its_reasons(cpu_suite, name)


def test_shape_specialised_hack_fails_only_at_drawn_or_top_shapes(cpu_suite):
    report = cpu_suite.get(HACKS / "timed_shapes_only" / "solution.py", GEMM, **cpu_options("timed_shapes_only"))
    assert all(s.correct for s in report.shapes if s.kind == "smoke")
    assert {s.kind for s in report.shapes if not s.correct} <= {"domain", "top"}


def test_a_kernel_wrong_only_above_the_old_sizes_fails_at_the_top_of_the_domain(cpu_suite):
    report = cpu_suite.get(
        HACKS / "wrong_above_checked_sizes" / "solution.py", GEMM, **cpu_options("wrong_above_checked_sizes")
    )
    assert [s.name for s in report.shapes if not s.correct] == ["top_K"]


def test_crash_verdicts_come_back_quickly_and_name_the_signal(cpu_suite):
    report = cpu_suite.get(HACKS / "crash_segfault" / "solution.py", GEMM, **cpu_options("crash_segfault"))
    assert any("SIGSEGV" in f.detail for f in report.findings if f.reason == Reason.CRASHED)
    hang = cpu_suite.get(HACKS / "hang" / "solution.py", GEMM, **cpu_options("hang"))
    assert hang.wall_s < TIMEOUTS["hang"] * 3
