"""Output checks: poison, NaN and tolerance are told apart; metadata problems are named."""

from __future__ import annotations

import torch

from jg_mcp.eval.checks import compare, decode, metadata_findings
from jg_mcp.eval.report import Reason


def _poisoned(shape, dtype):
    t = torch.empty(shape, dtype=dtype)
    t.view(torch.int16 if t.element_size() == 2 else torch.int32).fill_(-1)
    return t


def test_exact_output_passes_with_zero_error():
    ref = torch.randn(8, 16)
    stats, found = compare(ref.to(torch.bfloat16), ref, 0.02, 0.01)
    assert found == [] and stats.bad_elements == 0 and stats.max_rel < 0.01


def test_poison_left_in_the_output_is_unwritten_not_incorrect():
    ref = torch.randn(8, 16)
    out = ref.to(torch.bfloat16)
    out[4:] = _poisoned((4, 16), torch.bfloat16)
    stats, found = compare(out, ref, 0.02, 0.01)
    assert [f.reason for f in found] == [Reason.UNWRITTEN]
    assert stats.bad_elements == 64 and stats.worst_index[0] >= 4


def test_a_computed_nan_is_nonfinite():
    ref = torch.randn(4, 4)
    out = ref.clone()
    out[1, 2] = float("nan")
    _, found = compare(out, ref, 0.02, 0.01)
    assert [f.reason for f in found] == [Reason.NONFINITE]


def test_values_outside_tolerance_are_incorrect_and_the_worst_is_located():
    ref = torch.ones(4, 4)
    out = ref.clone()
    out[3, 1] = 1.5
    out[0, 0] = 1.02
    stats, found = compare(out, ref, 0.02, 0.01)
    assert [f.reason for f in found] == [Reason.INCORRECT]
    assert stats.worst_index == [3, 1] and stats.worst_value == 1.5 and stats.bad_elements == 1


def test_reference_inf_must_be_matched():
    ref = torch.tensor([float("inf"), 1.0])
    assert compare(torch.tensor([float("inf"), 1.0]), ref, 0.0, 0.0)[1] == []
    assert [f.reason for f in compare(torch.tensor([1e30, 1.0]), ref, 0.0, 0.0)[1]] == [Reason.NONFINITE]


def test_metadata_problems_are_named():
    desc = {"plain": True, "aliases_input": True, "shape": [2, 3], "dtype": "float16", "device": "cpu"}
    found = {f.reason for f in metadata_findings(desc, "bfloat16", [3, 2], "cuda")}
    assert found == {Reason.ALIASES_INPUT, Reason.WRONG_SHAPE, Reason.WRONG_DTYPE, Reason.WRONG_DEVICE}
    assert [f.reason for f in metadata_findings({"plain": False, "type": "x.Lazy"}, "bfloat16", [1], "cpu")] == [
        Reason.NOT_PLAIN_TENSOR
    ]


def test_decode_rebuilds_the_tensor_from_its_bytes():
    t = torch.randn(3, 5).to(torch.bfloat16)
    blob = t.reshape(-1).view(torch.uint8).numpy().tobytes()
    assert torch.equal(decode({"dtype": "bfloat16", "shape": [3, 5]}, blob), t)
