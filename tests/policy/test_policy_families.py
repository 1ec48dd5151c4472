"""Attention as a relative of the matrix product (jg_mcp.eval.ops.IMPLIED): attention multiplies matrices inside, so
a goal that forbids the matrix product forbids every spelling of attention, statically and at run time (red team,
third audit: a GEMM recovered from FlashAttention's log-sum-exp through torch.nn.attention.varlen)."""

from __future__ import annotations

import pytest
import yaml

from jg_mcp.eval.ops import family_members, forbidden_ops, in_family
from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.check import static_check
from tests.eval.eval_suite import GOALS

R = Reason
GEMM_GOALS = ["gemm_bf16", "gemm_fp8", "grouped_gemm_bf16"]


def forbidden(goal: str) -> list[str]:
    return yaml.safe_load((GOALS / f"{goal}.yaml").read_text())["forbidden"]


def reasons(src: str, goal: str) -> set[Reason]:
    return {f.reason for f in static_check(src, forbidden(goal))}


@pytest.mark.parametrize(
    "src",
    [
        "from torch.nn.attention.varlen import varlen_attn\ny = varlen_attn(q, k, v, cu, cu, 4, 4)\n",
        "import torch\ny = torch.nn.attention.varlen.varlen_attn(q, k, v, cu, cu, 4, 4)\n",
        "import torch\ny = torch.nn.functional.scaled_dot_product_attention(q, k, v)\n",
        "import torch.nn.functional as F\ny = F.multi_head_attention_forward\n",
        "from torch.nn.attention.flex_attention import flex_attention\n",
        "import torch\nwith torch.nn.attention.sdpa_kernel([]):\n    pass\n",
    ],
    ids=["varlen", "varlen-dotted", "sdpa", "multi-head", "flex", "sdpa-kernel"],
)
@pytest.mark.parametrize("goal", GEMM_GOALS)
def test_attention_is_a_relative_of_the_matrix_product(src, goal):
    """Attention multiplies matrices inside (V = identity and the log-sum-exp give back a GEMM): a goal that forbids
    the matrix product forbids every spelling of attention, by the family rule."""
    assert R.STATIC_FORBIDDEN in reasons(src, goal), src


@pytest.mark.parametrize("goal", GEMM_GOALS)
def test_attentions_native_ops_are_the_matrix_products_relatives_by_name(goal):
    """The custom op behind varlen_attn and the flash, efficient and sdpa kernels are related by the family's words
    (`attention`, `attn`), so the run-time recorder watches them too for a GEMM goal."""
    members = family_members(forbidden(goal))
    for op in ["_varlen_attn", "_flash_attention_forward", "_efficient_attention_forward", "varlen_attn"]:
        assert in_family(op, members), op
    assert {"scaled_dot_product_attention", "_scaled_dot_product_efficient_attention"} <= forbidden_ops(forbidden(goal))


def test_forbidding_attention_does_not_forbid_the_matrix_product():
    """The relation runs one way: an attention goal that allows matmul (none does today) could still use it."""
    assert "mm" not in forbidden_ops(["torch.nn.functional.scaled_dot_product_attention"])
