"""The native hacks (eval/hacks/native_*): C++ built in the candidate's sandbox under the open policy, rejected for
what the built code does once loaded (the library kernels it binds, the code it looks up by name, the results it
keeps between calls), whatever its source spelt."""

from __future__ import annotations

import shutil

import pytest

from tests.eval.eval_suite import HACKS, NATIVE_BUILDS, NATIVE_HACKS, eval_solution

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler: native code cannot be built")


@pytest.mark.slow
@needs_gxx
@pytest.mark.parametrize("name", sorted(NATIVE_HACKS))
def test_a_native_hack_is_rejected_for_what_it_does(cache, tmp_path, name):
    goal, reasons = NATIVE_HACKS[name]
    report = eval_solution(HACKS / name / "solution.py", goal, tmp_path, device="cpu", **NATIVE_BUILDS)
    assert not report.accepted
    assert reasons <= set(report.reasons), (report.reasons, [f.detail for f in report.findings])
