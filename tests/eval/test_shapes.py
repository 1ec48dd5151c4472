"""Which shapes an eval checks on the CPU: past the smoke shapes, each dimension at the largest value the goal
times or allows, whenever that fits the interpreter's budget; a kernel wrong only at real sizes is caught there."""

from __future__ import annotations

import collections
import random

import pytest
from eval_suite import GOALS, eval_solution

from jg_mcp.eval import Reason
from jg_mcp.eval.shapes import BEYOND_DRAWS, beyond, budget, select_cases
from jg_mcp.goals import DEMO_GOALS, load_goal

SHIPPED = [*sorted(GOALS.glob("*.yaml")), DEMO_GOALS / "axpy.yaml"]

HEAD_ONLY_SOFTMAX = '''
import torch

BLOCK = 32768


def kernel(x):
    """Normalises by the first 32768 columns only: a one-block kernel's classic bug."""
    xf = x.float()
    head = xf[:, :BLOCK]
    m = head.amax(dim=-1, keepdim=True)
    s = torch.exp(head - m).sum(dim=-1, keepdim=True)
    return (torch.exp(xf - m) / s).to(torch.bfloat16)
'''


def cpu_cases(path):
    return select_cases(load_goal(path), "all", "cpu", 2, random.Random(0))


def test_on_the_cpu_softmax_is_checked_at_its_largest_timed_row_length_with_one_row():
    cases = cpu_cases(GOALS / "softmax.yaml")
    largest = max(s.dims["N"] for s in load_goal(GOALS / "softmax.yaml").goal.shapes)
    assert [(c.kind, c.dims) for c in cases if c.name == "max_N"] == [("top", {"R": 1, "N": largest})]


def test_on_the_cpu_a_dimension_goes_to_its_domain_maximum_when_that_fits():
    cases = {c.name: c.dims for c in cpu_cases(GOALS / "swiglu.yaml")}
    assert cases["max_I"] == {"T": 1, "I": 32768}


def test_on_the_cpu_a_dimension_the_domain_does_not_name_goes_to_its_largest_timed_value():
    cases = {c.name: c.dims for c in cpu_cases(GOALS / "rope.yaml")}
    assert cases["max_P"] == {"T": 1, "SEQS": 1, "HQ": 1, "HKV": 1, "D": 64, "P": 131072}


def test_on_the_cpu_a_largest_value_that_does_not_fit_the_interpreter_budget_is_left_out():
    """131072 softmax rows of 16 are 10 MFLOP, 9x the budget; every gemm_fp8 dimension at its largest, too."""
    assert "max_R" not in {c.name for c in cpu_cases(GOALS / "softmax.yaml")}
    assert not [c for c in cpu_cases(GOALS / "gemm_fp8.yaml") if c.name.startswith("max_")]


def test_on_the_cpu_a_largest_value_a_top_shape_already_reaches_gets_no_second_case():
    cases = {c.name: c.dims for c in cpu_cases(GOALS / "attention_prefill.yaml")}
    assert cases["top_B"]["B"] == 8 and "max_B" not in cases
    assert cases["max_HKV"] == {"B": 1, "HKV": 16, "G": 1, "S": 16, "D": 64}


def test_on_the_gpu_no_largest_value_cases_are_added_the_timed_shapes_are_checked():
    cases = select_cases(load_goal(GOALS / "softmax.yaml"), "all", "cuda", 2, random.Random(0))
    assert not [c for c in cases if c.name.startswith("max_")]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_largest_value_case_of_a_shipped_goal_has_inputs_and_a_reference(path):
    goal = load_goal(path)
    for case in cpu_cases(path):
        if case.name.startswith("max_"):
            assert goal.reference(*goal.make_inputs(case.dims, 1, "cpu")) is not None, case


@pytest.mark.slow
def test_a_softmax_that_normalises_only_the_first_32768_columns_is_rejected_at_the_vocabulary_row(tmp_path):
    solution = tmp_path / "head_only" / "solution.py"
    solution.parent.mkdir()
    solution.write_text(HEAD_ONLY_SOFTMAX)
    report = eval_solution(solution, "softmax", tmp_path, device="cpu")
    assert not report.accepted
    wrong = {f.shape for f in report.findings if f.reason == Reason.INCORRECT}
    assert "max_N" in wrong and wrong <= {"max_N", "beyond_N_0", "beyond_N_1"}, [
        (f.reason, f.shape, f.detail[:100]) for f in report.findings
    ]


def test_beyond_the_timed_sizes_one_secret_value_is_drawn_in_each_half_of_the_range():
    goal = load_goal(GOALS / "softmax.yaml")
    named, top = 128256, 262144
    middle = named + (top - named) // 2
    drawn = [beyond(goal, "cuda", random.Random(seed)) for seed in range(200)]
    for cases in drawn:
        assert [c.name for c in cases] == ["beyond_N_0", "beyond_N_1"]
        low, high = (c.dims["N"] for c in cases)
        assert named < low <= middle + 1 < high <= top
        assert all(goal.bytes(c.dims) <= goal.bytes({"R": 64, "N": named}) for c in cases)
    assert len({c.dims["N"] for cases in drawn for c in cases}) > 350
    assert sum(131072 < cases[0].dims["N"] for cases in drawn) > 180


def test_on_the_cpu_every_value_drawn_beyond_the_timed_sizes_is_checked_on_one_row_that_fits_the_interpreter():
    """The range is capped where a one-row shape stops fitting the interpreter's budget, and both halves of what is
    left are drawn from. A drawn value that fit no shape used to be dropped: a softmax normalising only whole
    131072-column pages then passed a CPU eval (CI) when the other value fell below its page."""
    goal = load_goal(GOALS / "softmax.yaml")
    fits = budget(goal, "cpu")
    for seed in range(200):
        cases = beyond(goal, "cpu", random.Random(seed))
        assert [c.name for c in cases] == ["beyond_N_0", "beyond_N_1"]
        assert all(c.dims["R"] == 1 and fits(c.dims) for c in cases)
        low, high = (c.dims["N"] for c in cases)
        assert 128256 < low < high and 131072 < high < 262144, (seed, low, high)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_no_value_drawn_beyond_the_timed_sizes_is_left_out(path, device):
    goal = load_goal(path)
    for seed in range(5):
        drawn = collections.Counter(c.name.split("_")[1] for c in beyond(goal, device, random.Random(seed)))
        assert set(drawn.values()) <= {BEYOND_DRAWS}, drawn


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_on_the_gpu_every_value_beyond_the_timed_sizes_is_checked_on_a_shape_no_bigger_than_the_smallest_timed(path):
    goal = load_goal(path)
    least = min(goal.goal.shapes, key=lambda s: goal.bytes(s.dims)).dims
    for seed in range(5):
        for case in beyond(goal, "cuda", random.Random(seed)):
            name = case.name.split("_")[1]
            assert case.dims[name] > max(s.dims[name] for s in goal.goal.shapes)
            assert goal.bytes(case.dims) <= goal.bytes(least) and goal.flops(case.dims) <= goal.flops(least)
