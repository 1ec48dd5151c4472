"""The adversarial suite, named by its source: the hacks whose every reason is the source check's are rejected for
it, under the open policy (a forbidden operator under any spelling) and under the Triton-only policy (its allow-list:
what the open policy allows the candidate on the CPU gains it nothing there, and the strict policy still names).
The source decides these verdicts whatever runs: each hack is judged here by the function the eval calls on the
bytes it read (`source_findings`), and one hack per policy goes through a whole eval, whose verdict takes every such
finding (an eval of each of the 24 took 58 s of the suite's test durations in all, mostly their processes' starts)."""

from __future__ import annotations

import pytest
from eval_suite import GOALS, HACKS, goal_forbidden
from hack_suite import (
    CPU_HACKS,
    GEMM,
    OPEN_ALLOWED,
    by_source,
    cpu_options,
    expected,
    submit_cpu_hacks,
)

from jg_mcp.eval.harness import source_findings
from jg_mcp.eval.native.sources import SourceFile

NAMED_BY_SOURCE = sorted(n for n in set(CPU_HACKS) - set(OPEN_ALLOWED) if by_source(n, "open"))
"""The hacks of CPU_HACKS whose rejection under the open policy rests on the source check alone."""
WHOLE = {"open": "softmax_through_logsumexp", "triton": "read_seed"}
"""The hack of each policy that a whole eval judges."""


def reasons_by_source(name: str, policy: str) -> set[str]:
    goal = CPU_HACKS[name][0]
    files = [SourceFile("solution.py", (HACKS / name / "solution.py").read_bytes())]
    reference = (GOALS / f"{goal}.py").read_bytes()
    return {f.reason for f in source_findings(policy, files, goal_forbidden(goal), reference, [])}


@pytest.fixture(scope="module")
def cpu_suite(runs):
    submit_cpu_hacks(runs, [WHOLE["open"]], "open")
    submit_cpu_hacks(runs, [WHOLE["triton"]], "triton")
    return submit_cpu_hacks(runs, ["read_seed_environment"], "open")


def test_every_hack_judged_by_its_source_is_one_of_them():
    assert WHOLE["open"] in NAMED_BY_SOURCE and WHOLE["triton"] in OPEN_ALLOWED
    assert all(by_source(n, "triton") for n in OPEN_ALLOWED), "else it needs a whole eval under the triton policy"


@pytest.mark.parametrize("name", NAMED_BY_SOURCE)
def test_a_hack_the_source_check_names_is_rejected_for_it_under_the_open_policy(name):
    missing = expected(name, "open") - reasons_by_source(name, "open")
    assert not missing, f"{name}: missing {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(OPEN_ALLOWED))
def test_the_triton_policy_rejects_what_the_open_policy_allows(name):
    missing = expected(name, "triton") - reasons_by_source(name, "triton")
    assert not missing, f"{name}: missing {sorted(missing)}"


@pytest.mark.parametrize("policy", sorted(WHOLE))
def test_a_whole_eval_is_rejected_for_what_its_source_check_names(cpu_suite, policy):
    name = WHOLE[policy]
    report = cpu_suite.get(HACKS / name / "solution.py", CPU_HACKS[name][0], **cpu_options(name, policy))
    assert report.policy == policy and not report.accepted
    missing = expected(name, policy) - set(report.reasons)
    assert not missing, f"{name}: missing {sorted(missing)}; got {report.reasons}"


def test_the_seed_is_nowhere_the_candidate_can_look(cpu_suite):
    report = cpu_suite.get(
        HACKS / "read_seed_environment" / "solution.py", GEMM, **cpu_options("read_seed_environment")
    )
    assert "SEEN:" in report.candidate_output_tail
    assert str(report.seed) not in report.candidate_output_tail
    assert all(s.correct for s in report.shapes)
