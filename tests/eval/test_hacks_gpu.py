"""The adversarial suite's GPU-only hacks (eval/h200_check.py's table): on a GPU each is rejected for its reasons; on
the CPU, where their one trick (timing, compiling no kernel, a CUDA graph's capture) has nothing to work on, those of
ACCEPTED_ON_CPU compute the right answer, which is why only the GPU suite can catch them."""

from __future__ import annotations

import pytest
from eval_suite import CUDA, HACKS
from hack_suite import ACCEPTED_ON_CPU, GPU_EITHER, GPU_HACKS, gpu_options, hack_goal

AT_SMOKE = {"domain_shapes": 0}
"""At the goal's smoke shapes: what these hacks compute does not change with the shape on the CPU, and rope's drawn
and beyond-the-timed shapes took 11 of 13 s of one eval in the Triton interpreter."""


@pytest.fixture(scope="module")
def cpu_suite(runs):
    for name in sorted(ACCEPTED_ON_CPU):
        runs.submit(HACKS / name / "solution.py", hack_goal(name)[0], **AT_SMOKE)
    return runs


@pytest.mark.parametrize("name", sorted(ACCEPTED_ON_CPU))
def test_timing_only_hacks_are_correct_on_the_cpu(cpu_suite, name):
    """Their one trick is speed on inputs seen before, or compiling no kernel of their own: without timing and with
    Triton interpreted there is nothing to catch (and nothing else they get wrong), which is why the GPU suite has
    them."""
    report = cpu_suite.get(HACKS / name / "solution.py", hack_goal(name)[0], **AT_SMOKE)
    assert report.shapes and all(s.correct for s in report.shapes), report.reasons


@pytest.fixture(scope="module")
def gpu_suite(runs):
    for name in GPU_HACKS:
        runs.submit(HACKS / name / "solution.py", hack_goal(name)[0], **gpu_options(name))
    return runs


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device: timing, streams and the physical floor")
@pytest.mark.parametrize("name", sorted(GPU_HACKS))
def test_gpu_hack_is_rejected_for_its_reason(gpu_suite, name):
    report = gpu_suite.get(HACKS / name / "solution.py", hack_goal(name)[0], **gpu_options(name))
    assert not report.accepted
    missing = GPU_HACKS[name] - set(report.reasons)
    either = GPU_EITHER.get(name)
    assert not either or either & set(report.reasons), f"{name}: none of {sorted(either or [])}: {report.reasons}"
    assert not missing, (
        f"{name}: missing {sorted(missing)}; got {report.reasons}: {[f.detail for f in report.findings]}"
    )
