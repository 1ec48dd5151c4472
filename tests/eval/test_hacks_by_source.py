"""The adversarial suite, named by its source: the hacks whose every reason is the source check's are rejected for
it, under the open policy (a forbidden operator under any spelling) and under the Triton-only policy (its allow-list:
what the open policy allows the candidate on the CPU gains it nothing there, and the strict policy still names).
The source decides these verdicts whatever the shapes, so their evals run at the smoke shapes (hack_suite.BY_SOURCE).
"""

from __future__ import annotations

import pytest
from eval_suite import HACKS
from hack_suite import (
    CPU_HACKS,
    GEMM,
    OPEN_ALLOWED,
    assert_rejected_for_its_reasons,
    by_source,
    cpu_options,
    expected,
    submit_cpu_hacks,
)

NAMED_BY_SOURCE = sorted(n for n in set(CPU_HACKS) - set(OPEN_ALLOWED) if by_source(n, "open"))
"""The hacks of CPU_HACKS whose rejection under the open policy rests on the source check alone."""


@pytest.fixture(scope="module")
def cpu_suite(runs):
    submit_cpu_hacks(runs, NAMED_BY_SOURCE, "open")
    submit_cpu_hacks(runs, sorted(OPEN_ALLOWED), "triton")
    return submit_cpu_hacks(runs, ["read_seed_environment"], "open")


@pytest.mark.parametrize("name", NAMED_BY_SOURCE)
def test_a_hack_the_source_check_names_is_rejected_for_it_under_the_open_policy(cpu_suite, name):
    assert_rejected_for_its_reasons(cpu_suite, name)


@pytest.mark.parametrize("name", sorted(OPEN_ALLOWED))
def test_the_triton_policy_rejects_what_the_open_policy_allows(cpu_suite, name):
    goal, _ = CPU_HACKS[name]
    report = cpu_suite.get(HACKS / name / "solution.py", goal, **cpu_options(name, "triton"))
    assert report.policy == "triton"
    assert not report.accepted
    missing = expected(name, "triton") - set(report.reasons)
    assert not missing, (
        f"{name}: missing {sorted(missing)}; got {report.reasons}: {[f.detail for f in report.findings]}"
    )


def test_the_seed_is_nowhere_the_candidate_can_look(cpu_suite):
    report = cpu_suite.get(
        HACKS / "read_seed_environment" / "solution.py", GEMM, **cpu_options("read_seed_environment")
    )
    assert "SEEN:" in report.candidate_output_tail
    assert str(report.seed) not in report.candidate_output_tail
    assert all(s.correct for s in report.shapes)
