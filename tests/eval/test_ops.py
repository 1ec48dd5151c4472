"""Operator families by name: which aten ops count as a forbidden op's relatives (jg_mcp.eval.ops)."""

from __future__ import annotations

import pytest
from eval_suite import GOALS, eval_solution

from jg_mcp.eval.ops import FAMILIES, family_members, in_family
from jg_mcp.eval.reasons import Reason

MATMUL = FAMILIES[0]

CDIST_GEMM = """
import torch


def kernel(a, b, scale_a, scale_b):
    x, y = a.float() * scale_a, (b.float() * scale_b).t()
    d = torch.cdist(x, y, compute_mode="use_mm_for_euclid_dist")
    sq = (x * x).sum(1, keepdim=True) + (y * y).sum(1)[None, :]
    return ((sq - d * d) / 2).to(torch.bfloat16)
"""

HSPMM_GEMM = """
import torch


def kernel(a, b, scale_a, scale_b):
    x, y = a.float() * scale_a, b.float() * scale_b
    return torch.hspmm(x.to_sparse(), y).to_dense().to(torch.bfloat16)
"""


@pytest.mark.parametrize("op", ["hspmm", "smm", "spmm", "dsmm", "hsmm", "_int_mm", "int4mm_packed_weight_cpu"])
def test_a_product_named_as_a_words_ending_is_a_matrix_product(op):
    """Sparse and packed products end their name in `mm` without a word break: `hspmm` ran a library GEMM past the
    whole-word rule (a red-team find)."""
    assert in_family(op, MATMUL)


@pytest.mark.parametrize("op", ["cdist", "_cdist_forward", "_euclidean_dist", "pdist"])
def test_distances_computed_by_a_matrix_product_are_matrix_products(op):
    """cdist's 'use_mm_for_euclid_dist' mode runs aten::mm inside _euclidean_dist, which a dispatch mode sees
    only from outside: |a|^2 + |b|^2 - d^2 is twice the GEMM (a red-team find)."""
    assert in_family(op, MATMUL)


@pytest.mark.parametrize(
    "op", ["_dimV", "distributed", "dist", "pairwise_distance", "summary", "digamma", "common_notes"]
)
def test_names_that_merely_contain_the_letters_are_not(op):
    assert not in_family(op, MATMUL)


@pytest.mark.parametrize(
    ("name", "family"),
    [("Conv1d", 0), ("LazyConv2d", 0), ("ConvTranspose1d", 0), ("EmbeddingBag", 0), ("GLU", 6), ("SiLU", 6)],
)
def test_a_module_class_is_its_operators_relative_however_its_words_are_joined(name, family):
    """`torch.nn.Conv1d` (1x1, a GEMM through cuDNN) and `torch.nn.GLU` (the library's sigmoid) passed the family check:
    `Conv1d` split into `Conv` and `1d`, and the short member `glu` was compared case by case (red team round 5)."""
    assert in_family(name, FAMILIES[family])


@pytest.mark.parametrize("name", ["Tensor", "Module", "Parameter", "Function", "Config", "Stream", "Event", "Size"])
def test_the_classes_an_honest_kernel_uses_are_in_no_family(name):
    assert not any(in_family(name, family) for family in FAMILIES)


@pytest.mark.slow
@pytest.mark.parametrize("source", [CDIST_GEMM, HSPMM_GEMM], ids=["cdist", "hspmm"])
def test_a_library_gemm_through_a_distance_or_a_sparse_product_is_rejected(tmp_path, source):
    solution = tmp_path / "src" / "solution.py"
    solution.parent.mkdir()
    solution.write_text(source)
    report = eval_solution(solution, GOALS / "gemm_fp8.yaml", tmp_path / "runs", device="cpu", domain_shapes=0)
    assert not report.accepted
    assert {Reason.STATIC_FORBIDDEN, Reason.FORBIDDEN_CALL} & set(report.reasons), report.reasons


def test_the_matrix_products_wider_family_leaves_ops_that_only_share_a_word_ending():
    """`.numpy()` runs resolve_conj and resolve_neg: a member `solve` made every honest kernel that called it
    a forbidden_call (a clean-clone CI caught it). Solves are members by their whole names."""
    members = family_members(["torch.matmul"])
    for op in ("resolve_conj", "resolve_neg", "erfinv", "slice_inverse"):
        assert not in_family(op, members), op
    for op in ("triangular_solve", "linalg_solve_triangular", "cholesky_solve", "lu_solve", "_spsolve"):
        assert in_family(op, members), op


def test_composite_layers_join_every_family_they_compute():
    """nn.TransformerEncoderLayer runs as one native op (_transformer_encoder_layer_fwd) whose GEMMs, norms and
    softmax dispatch nothing the recorder sees: a red team made it a GEMM. It and multi-head attention are members
    of the matrix product's, softmax's, the norms' and attention's families; softmin is softmax's."""
    for forbidden in (
        ["torch.matmul"],
        ["torch.softmax"],
        ["torch.nn.functional.rms_norm"],
        ["torch.nn.functional.scaled_dot_product_attention"],
    ):
        members = family_members(forbidden)
        for op in ("_transformer_encoder_layer_fwd", "_native_multi_head_attention", "TransformerEncoderLayer"):
            assert in_family(op, members), (forbidden, op)
    assert in_family("softmin", family_members(["torch.softmax"]))


@pytest.mark.parametrize(
    "forbidden, op",
    [
        (["torch.softmax"], "logsumexp"),
        (["torch.softmax"], "_scaled_dot_product_flash_attention_for_cpu"),
        (["torch.nn.functional.cross_entropy"], "scaled_dot_product_attention"),
        (["torch.nn.functional.rms_norm"], "_cdist_forward"),
        (["torch.nn.functional.rms_norm"], "dist"),
        (["torch.nn.functional.rms_norm"], "pairwise_distance"),
        (["torch.nn.functional.silu"], "softplus_backward"),
        (["torch.nn.functional.silu"], "mish"),
        (["torch.nn.functional.silu"], "_softmax"),
        (["torch.nn.functional.silu"], "binary_cross_entropy_with_logits"),
        (["torch.nn.functional.silu"], "soft_margin_loss"),
        (["torch.nn.functional.silu"], "logaddexp"),
        (["torch.matmul"], "ormqr"),
        (["torch.matmul"], "addr"),
        (["torch.matmul"], "flex_attention"),
        (["torch.softmax"], "AdaptiveLogSoftmaxWithLoss"),
    ],
)
def test_what_computes_a_forbidden_op_inside_another_is_its_family(forbidden, op):
    """Red-team finds: a softmax by exp(x - logsumexp(x)); cross entropy's softmax inside an attention kernel (a
    query of ones against keys of logits); an RMS norm by cdist to the origin; sigmoid as softplus's derivative.
    Softmax, logsumexp and cross entropy take each other's families and attention's; the norms take the
    distances; silu and sigmoid take softplus, mish, the losses that are softplus, and the softmax families (a
    two-class softmax is a sigmoid); a GEMM is Householder reflectors applied (ormqr) or rank-one updates."""
    assert in_family(op, family_members(forbidden)), (forbidden, op)
