"""The domain's extremes in a whole eval, on the CPU with a stated GPU memory: checked after every other shape,
listed with how they were chosen, and a kernel wrong only above the sizes checked before is rejected there."""

from __future__ import annotations

import pytest
from eval_suite import eval_solution

from jg_mcp.eval import correctness
from jg_mcp.eval.correctness import EXTREME_TRIALS
from jg_mcp.eval.reasons import Reason
from jg_mcp.goals import DEMO_GOALS

pytestmark = pytest.mark.slow

HONEST = "import torch\n\n\ndef kernel(x, y, alpha):\n    return torch.addcmul(y, x, alpha)\n"
WRONG_ABOVE = '''import torch


def kernel(x, y, alpha):
    """Right on the first 2^17 elements, the rest left as y: the offset-overflow bug class, in small."""
    out = torch.addcmul(y, x, alpha)
    out[1 << 17 :] = y[1 << 17 :]
    return out
'''
STATED = 64 << 20
"""The stated free GPU memory: half of it at 16 bytes per byte moved (axpy moves 12 per element) allows about
174k elements, past 2^17 and well within the interpreter's reach."""
OPTIONS = {"device": "cpu", "shapes": "smoke", "domain_shapes": 0, "trials": 3}


@pytest.fixture
def stated_memory(monkeypatch):
    monkeypatch.setattr(correctness, "free_bytes", lambda device: STATED)


def run(tmp_path, source: str):
    (tmp_path / "src").mkdir(parents=True)
    (tmp_path / "src" / "solution.py").write_text(source)
    return eval_solution(tmp_path / "src" / "solution.py", DEMO_GOALS / "axpy.yaml", tmp_path / "runs", **OPTIONS)


def test_an_honest_kernel_is_checked_at_the_extremes_after_every_other_shape(tmp_path, stated_memory):
    report = run(tmp_path, HONEST)
    assert report.accepted, report.reasons
    extremes = [s for s in report.shapes if s.kind == "extreme"]
    assert extremes and report.shapes[-len(extremes) :] == extremes
    assert all(s.correct and s.trials == EXTREME_TRIALS and s.chosen and "free" in s.chosen for s in extremes)
    assert all(s.trials == 3 for s in report.shapes if s.kind != "extreme")
    assert max(s.dims["N"] for s in extremes) > 1 << 17


def test_a_kernel_wrong_only_above_the_sizes_checked_before_is_rejected_at_an_extreme_on_a_gpu_only(
    tmp_path, monkeypatch
):
    """Without a GPU (no free memory to size them by) no extremes are checked and the CPU's small caps stand."""
    plain = run(tmp_path / "cpu", WRONG_ABOVE)
    assert plain.accepted and not [s for s in plain.shapes if s.kind == "extreme"]
    monkeypatch.setattr(correctness, "free_bytes", lambda device: STATED)
    report = run(tmp_path / "gpu", WRONG_ABOVE)
    assert not report.accepted and Reason.INCORRECT in report.reasons
    assert [s.kind for s in report.shapes if not s.correct] == ["extreme"]
