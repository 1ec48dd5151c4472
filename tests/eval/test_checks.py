"""Output checks: poison, NaN and tolerance are told apart; metadata problems are named."""

from __future__ import annotations

import math

import pytest
import torch

from jg_mcp.eval.checks import call_findings, mass_findings, measure, metadata_findings, unravel
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.wire.messages import Done, OutputMeta


def _poisoned(shape, dtype):
    t = torch.empty(shape, dtype=dtype)
    t.view(torch.int16 if t.element_size() == 2 else torch.int32).fill_(-1)
    return t


def _judged(out, ref, atol, rtol):
    measured = measure(out, ref, atol, rtol)
    return measured.stats, measured.findings


def test_exact_output_passes_with_zero_error():
    ref = torch.randn(8, 16)
    stats, found = _judged(ref.to(torch.bfloat16), ref, 0.02, 0.01)
    assert found == [] and stats.bad_elements == 0 and stats.max_rel < 0.01


def test_poison_left_in_the_output_is_unwritten_not_incorrect():
    ref = torch.randn(8, 16)
    out = ref.to(torch.bfloat16)
    out[4:] = _poisoned((4, 16), torch.bfloat16)
    stats, found = _judged(out, ref, 0.02, 0.01)
    assert [f.reason for f in found] == [Reason.UNWRITTEN]
    assert stats.bad_elements == 64 and stats.worst_index[0] >= 4


def test_a_computed_nan_is_nonfinite():
    ref = torch.randn(4, 4)
    out = ref.clone()
    out[1, 2] = float("nan")
    _, found = _judged(out, ref, 0.02, 0.01)
    assert [f.reason for f in found] == [Reason.NONFINITE]


def test_values_outside_tolerance_are_incorrect_and_the_worst_is_located():
    ref = torch.ones(4, 4)
    out = ref.clone()
    out[3, 1] = 1.5
    out[0, 0] = 1.02
    stats, found = _judged(out, ref, 0.02, 0.01)
    assert [f.reason for f in found] == [Reason.INCORRECT]
    assert stats.worst_index == [3, 1] and stats.worst_value == 1.5 and stats.bad_elements == 1


@pytest.mark.parametrize("shape", [[7], [3, 5], [2, 1, 4], [4, 3, 2, 5], [1, 1, 9]])
def test_the_worst_element_is_located_as_torch_unravel_index_locates_it(shape):
    n = math.prod(shape)
    for flat in {0, 1, n // 2, n - 1}:
        assert unravel(flat, shape) == [int(i) for i in torch.unravel_index(torch.tensor(flat), shape)]


@pytest.mark.slow
def test_judging_an_output_imports_nothing_of_torchs_symbolic_shapes():
    """torch.unravel_index's first call imports sympy and torch's symbolic shapes: seconds in an eval's harness
    process on a host without their bytecode."""
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "from jg_mcp.eval.checks import measure\n"
        "ref = torch.randn(4, 8)\n"
        "out = ref.clone()\n"
        "out[2, 3] = 9.0\n"
        "assert measure(out, ref, 0.01, 0.01).stats.worst_index == [2, 3]\n"
        "print(sorted(m for m in ('sympy', 'torch.fx.experimental.symbolic_shapes') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_correct_output_names_the_element_closest_to_its_tolerance():
    ref = torch.tensor([100.0, 1.0, 1.0])
    stats, found = _judged(torch.tensor([100.9, 1.0, 1.0]), ref, 0.02, 0.01)
    assert found == [] and stats.worst_index == [0] and stats.worst_value == pytest.approx(100.9)


def test_reference_inf_must_be_matched():
    ref = torch.tensor([float("inf"), 1.0])
    assert _judged(torch.tensor([float("inf"), 1.0]), ref, 0.0, 0.0)[1] == []
    assert [f.reason for f in _judged(torch.tensor([1e30, 1.0]), ref, 0.0, 0.0)[1]] == [Reason.NONFINITE]


def test_the_worst_ratio_is_the_largest_error_over_its_tolerance():
    ref = torch.tensor([[1.0, 2.0], [-4.0, 0.0]])
    out = torch.tensor([[1.0, 2.0], [-4.04, 0.015]])
    measured = measure(out, ref, 0.02, 0.01)
    assert measured.findings == [] and measured.stats.max_abs == pytest.approx(0.04, abs=1e-6)
    assert measured.worst_ratio == pytest.approx(0.015 / 0.02, abs=1e-5)


def test_the_worst_ratio_is_above_one_exactly_when_values_are_out_of_tolerance():
    ref = torch.ones(4)
    assert measure(ref + 0.0299, ref, 0.02, 0.01).worst_ratio < 1
    wrong = measure(ref + torch.tensor([0.0, 0.0, 0.09, 0.0]), ref, 0.02, 0.01)
    assert [f.reason for f in wrong.findings] == [Reason.INCORRECT]
    assert wrong.worst_ratio == pytest.approx(3.0, rel=1e-5)


@pytest.mark.parametrize(
    "out, ref, atol, expected",
    [
        (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 1.0]), 0.02, math.inf),
        (_poisoned((2,), torch.bfloat16), torch.ones(2), 0.02, math.inf),
        (torch.tensor([float("inf"), 1.0]), torch.tensor([float("inf"), 1.0]), 0.0, 0.0),
        (torch.tensor([2.0, 1.0]), torch.tensor([float("inf"), 1.0]), 0.0, math.inf),
        (torch.tensor([0.0, 1.0]), torch.tensor([0.0, 1.0]), 0.0, 0.0),
        (torch.tensor([1e-9, 1.0]), torch.tensor([0.0, 1.0]), 0.0, math.inf),
    ],
)
def test_the_worst_ratio_of_nonfinite_poison_and_zero_tolerance(out, ref, atol, expected):
    assert measure(out, ref, atol, 0.0).worst_ratio == expected


def test_metadata_problems_are_named():
    meta = OutputMeta(type="torch.Tensor", plain=True, aliases_input=True, shape=[2, 3], dtype="float16", device="cpu")
    found = {f.reason for f in metadata_findings(meta, "bfloat16", [3, 2], "cuda")}
    assert found == {Reason.ALIASES_INPUT, Reason.WRONG_SHAPE, Reason.WRONG_DTYPE, Reason.WRONG_DEVICE}
    assert [f.reason for f in metadata_findings(OutputMeta(type="x.Lazy"), "bfloat16", [1], "cpu")] == [
        Reason.NOT_PLAIN_TENSOR
    ]


def test_dropping_a_share_of_a_rows_mass_fails_even_within_atol():
    logits = torch.randn(4, 4096, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ref = torch.softmax(logits, -1).float()
    small = ref < ref.quantile(0.8, dim=-1, keepdim=True)
    dropped = torch.where(small, torch.zeros_like(ref), ref)
    assert measure(dropped, ref, 1.0, 0.01).findings == []
    found = mass_findings(dropped, ref, 0.01)
    assert [f.reason for f in found] == [Reason.INCORRECT] and "4 of 4 rows lose more than rtol" in found[0].detail
    assert mass_findings(ref.to(torch.bfloat16), ref, 0.01) == []


def test_judging_float64_buffers_leaves_them_as_they_were():
    """The judge's float64 copies are the buffers themselves at float64: it must work on new tensors."""
    ref = torch.randn(8, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    clean = ref + 1e-3
    special = clean.clone()
    special[2, 3] = float("nan")
    for out in (clean, special):
        kept = out.clone(), ref.clone()
        measure(out, ref, 0.02, 0.01)
        mass_findings(out, ref, 0.01)
        assert torch.equal(out.nan_to_num(), kept[0].nan_to_num()) and torch.equal(ref, kept[1])


def test_a_write_into_the_output_buffer_while_it_is_judged_does_not_reach_the_judged_values(monkeypatch):
    """The output buffer is shared with the candidate's process: once the judge has found every value finite, a NaN
    written into the buffer must not turn up in the values it goes on to measure."""
    from jg_mcp.eval import checks

    ref = torch.randn(64, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    out = ref + 1e-3
    real = torch.isfinite

    def then_written(t):
        found = real(t)
        out[7] = float("nan")
        return found

    monkeypatch.setattr(checks.torch, "isfinite", then_written)
    stats, found = _judged(out, ref, 0.02, 0.01)
    assert found == [] and math.isfinite(stats.max_abs) and math.isfinite(stats.max_rel), stats


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fnuz"), reason="no fnuz float8 in this torch")
def test_poison_that_reads_as_a_finite_number_is_still_unwritten():
    """In the fnuz float8 formats all-ones bytes are a finite negative number, not NaN."""
    ref = torch.full((4, 8), -0.5).to(torch.float8_e4m3fnuz)
    out = ref.clone()
    out.view(torch.uint8)[1].fill_(255)
    assert math.isfinite(float(out.float()[1, 0]))
    stats, found = _judged(out, ref.float(), 1e9, 1e9)
    assert [f.reason for f in found] == [Reason.UNWRITTEN] and stats.bad_elements == 8


@pytest.mark.parametrize("text", ["SystemExit(0)", "SystemExit" + "B" * 2989, "the kernel called sys.exit(0)"])
def test_an_error_text_that_looks_like_an_exit_is_an_exception(text):
    """The error is free text the candidate writes; only the worker's structured `raised` says it exited."""
    assert [f.reason for f in call_findings(Done(raised="exception", error=text))] == [Reason.EXCEPTION]
    assert [f.reason for f in call_findings(Done(error=text))] == [Reason.EXCEPTION]


def test_an_exit_is_told_by_the_structured_field_and_a_return_is_no_finding():
    assert [f.reason for f in call_findings(Done(raised="exit", error="x"))] == [Reason.EARLY_EXIT]
    assert call_findings(Done()) == []
