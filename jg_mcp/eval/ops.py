"""Operator families: every spelling of a library op reaches aten as one of a family's members, so a forbidden name
forbids its whole family, statically (as torch.NAME, torch.nn.functional.NAME and the tensor method) and at run
time (the aten operators the candidate's process runs, in any thread, recorded in the worker by
jg_mcp/eval/candidate/recorder.py: a hint)."""

from __future__ import annotations

import re

COMPOSITES = {
    "transformer",
    "Transformer",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerDecoder",
    "multi_head_attention",
    "MultiheadAttention",
    "flex_attention",
}
"""Layers that run as one native op (nn.TransformerEncoderLayer's _transformer_encoder_layer_fwd, multi-head
attention's _native_multi_head_attention) whose GEMMs, norms and softmax dispatch nothing the recorder sees: members
of each family they compute."""
FAMILIES = [
    {
        "mm",
        "bmm",
        "addmm",
        "addbmm",
        "baddbmm",
        "matmul",
        "linear",
        "einsum",
        "_scaled_mm",
        "dot",
        "vdot",
        "mv",
        "addmv",
        "_int_mm",
        "_grouped_mm",
        "_scaled_grouped_mm",
        "tensordot",
        "__matmul__",
        "_addmm_activation",
        "conv1d",
        "conv2d",
        "conv3d",
        "convolution",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "cudnn_convolution",
        "conv_tbc",
        "cdist",
        "pdist",
        "_euclidean_dist",
        "linalg",
        "triangular_solve",
        "solve_triangular",
        "cholesky_solve",
        "lu_solve",
        "ldl_solve",
        "spsolve",
        "lstsq",
        "pinverse",
        "cholesky",
        "matrix_power",
        "matrix_exp",
        "householder_product",
        "ormqr",
        "orgqr",
        "addr",
        "ger",
        "embedding_bag",
        "rnn",
        "lstm",
        "gru",
        "RNN",
        "GRU",
        "RNNCell",
        "GRUCell",
        "LSTMCell",
        "EmbeddingBag",
        "inner",
        "cov",
        "corrcoef",
        *COMPOSITES,
    },
    {
        "softmax",
        "_softmax",
        "log_softmax",
        "_log_softmax",
        "_safe_softmax",
        "softmin",
        "AdaptiveLogSoftmaxWithLoss",
        *COMPOSITES,
    },
    {
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_flash_attention_forward",
        "_efficient_attention_forward",
        "_scaled_dot_product_attention_math",
        "_scaled_dot_product_flash_attention_for_cpu",
        "flex_attention",
        "attention",
        "attn",
        *COMPOSITES,
    },
    {
        "rms_norm",
        "_fused_rms_norm",
        "layer_norm",
        "native_layer_norm",
        "RMSNorm",
        "normalize",
        "vector_norm",
        "norm",
        "dist",
        "pairwise_distance",
        "cosine_similarity",
        *COMPOSITES,
    },
    {
        "cross_entropy",
        "cross_entropy_loss",
        "nll_loss",
        "nll_loss_forward",
        "nll_loss2d_forward",
        "nll_loss_nd",
        "CrossEntropyLoss",
        "NLLLoss",
    },
    {"logsumexp", "logaddexp", "logaddexp2"},
    {
        "silu",
        "silu_",
        "sigmoid",
        "sigmoid_",
        "glu",
        "SiLU",
        "expit",
        "softplus",
        "Softplus",
        "mish",
        "Mish",
        "binary_cross_entropy_with_logits",
        "BCEWithLogitsLoss",
        "soft_margin_loss",
        "SoftMarginLoss",
        "MultiLabelSoftMarginLoss",
    },
]
"""Operator families: a forbidden name forbids its whole family, whatever it is called at the aten level. Beyond the
members listed, an op is a member's relative by its name (`in_family`). The matrix product's family holds what
computes one through a library under another name: torch.linalg (a triangular solve of [[I, 0], [-A, I]] against
[[B^T], [0]] is A B^T by BLAS trsm; its matrix functions multiply), the other solves and inverses, embedding_bag's
weighted sums, inner products and covariances, the recurrent cells and multi-head attention's projections, under
their functional and module names. The attention family holds the namespace torch.nn.attention as a whole (its
varlen_attn runs FlashAttention behind a custom op, which neither the names of the other members nor the run-time
recorder see into), as the matrix product's holds torch.linalg, and `attn`, the word torch spells attention with
(varlen_attn, the custom op _varlen_attn) wherever it stands. The norms' holds the distances (cdist to the origin
is a row's norm), silu's softplus (whose derivative is the sigmoid) and mish."""


_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z][a-z]*|[a-z]+|[0-9]+[a-z]*")
"""A CamelCase name's words: acronyms whole (`GRU`, `LSTMCell` is LSTM and Cell), digits with their suffix (`2d`)."""


def _words(name: str, camel: bool = True) -> list[str]:
    """A name's words: split at `_`, and a part with a capital in it (a class: `Softmax2d`, `InstanceNorm1d`,
    `PairwiseDistance`) also at its capitals and digits, so a module's name is judged by the operator it names;
    not with `camel` False (C++ symbols, which the native check judges by its own rules)."""
    parts = [part for part in name.split("_") if part]
    return [w for part in parts for w in (_CAMEL.findall(part) if camel and part.lower() != part else [part])]


def in_family(op: str, members: set[str], camel: bool = True) -> bool:
    """`op` is a relative of a member by name: the member's words (split at `_`) appear in `op`'s words as a
    contiguous run, the first of them possibly as a word's ending (`log_sigmoid_forward`, `logsigmoid` and
    `hardsigmoid` are sigmoid's; `linalg_matmul` is matmul's; `bilinear` is linear's; `hspmm`, `spmm` and
    `int4mm_packed_weight_cpu` are mm's). Case counts for a member of 3 letters or fewer (`mm`, `dot`, `glu`, and
    the module `GRU`): op names are lower case, so `_dimV` (a sparse tensor's dense dimensions) is not mv's. The
    cumulative form of a member (a `cum` inside: `logcumsumexp`) is that member's relative too: its last element is
    the member's reduction."""
    if camel and op[:1].isupper() and _class_in_family(op, members):
        return True
    candidates = [op, op.replace("cum", "", 1)] if "cum" in op else [op]
    for name in candidates:
        words = _words(name, camel)
        for member in members:
            short = len(member.strip("_")) <= 3
            key = _words(member, camel) if short else [w.lower() for w in _words(member, camel)]
            if not key or not key[0].isidentifier():
                continue
            for i in range(len(words) - len(key) + 1):
                first, rest = words[i], [w.lower() for w in words[i + 1 : i + len(key)]]
                if (first if short else first.lower()).endswith(key[0]) and rest == key[1:]:
                    return True
    return False


def _class_in_family(name: str, members: set[str]) -> bool:
    """A class's name (`Conv1d`, `LazyConv1d`, `ConvTranspose1d`, `GLU`, `Bilinear`) names its operator however its
    words are cased and joined: some run of its CamelCase words, lower-cased and joined, is a member spelt without
    underscores (`conv1d`, `conv_transpose1d`, `glu`), or, for a member of more than 3 letters, ends with one."""
    words = [w for part in name.split("_") if part for w in _CAMEL.findall(part)]
    runs = {"".join(words[i:j]).lower() for i in range(len(words)) for j in range(i + 1, len(words) + 1)}
    for member in members:
        flat = member.replace("_", "").lower()
        if flat and (flat in runs or (len(flat) > 3 and any(run.endswith(flat) for run in runs))):
            return True
    return False


IMPLIED = {0: (2,), 1: (4, 5, 2), 4: (1, 5, 2), 5: (1, 4, 2), 6: (1, 4, 5, 2)}
"""Families that compute another's op inside them, by index into FAMILIES: attention is two matrix products (with
V the identity its output is the attention weights, and its log-sum-exp over keys {b_j, 0} is softplus(a_i . b_j):
a GEMM, whatever the spelling, sdpa, flash, efficient, varlen or multi-head); a softmax is exp(x - logsumexp(x)) and
sits inside every attention kernel (a query of ones against keys of logits gives softmax(logits)); cross entropy is
a log-softmax; a two-class softmax is a sigmoid (softmax([x, 0])[0]) and a two-term logsumexp a softplus.
Forbidding the matrix product forbids attention; forbidding softmax, logsumexp or cross entropy forbids the others
of the three and attention (cross entropy over a row broadcast along a trailing dimension, with targets 0..N-1
there, is the row's whole -log_softmax); forbidding silu or sigmoid forbids all four."""


def family_members(forbidden: list[str]) -> set[str]:
    """The members of every family the forbidden list touches, and of the families those imply (IMPLIED): the
    names `in_family` relates ops to."""
    leaves = {name.rsplit(".", 1)[-1] for name in forbidden}
    touched = {i for i, family in enumerate(FAMILIES) if leaves & family}
    touched |= {j for i in touched for j in IMPLIED.get(i, ())}
    return set().union(*(FAMILIES[i] for i in touched))


def forbidden_ops(forbidden: list[str]) -> set[str]:
    """aten operator names whose use is recorded at run time for this forbidden list."""
    return {name.rsplit(".", 1)[-1] for name in forbidden} | family_members(forbidden)


def family_names(forbidden: list[str]) -> list[str]:
    """The forbidden list widened to every member of each operator family it touches, as `torch.NAME`,
    `torch.nn.functional.NAME` and the tensor method: `torch.tensordot` is a matrix product whether or not the
    goal's list names it."""
    leaves = {name.rsplit(".", 1)[-1] for name in forbidden}
    extra = []
    for family in FAMILIES:
        if leaves & family:
            for member in sorted(family):
                if not member.startswith("_") and member[0].islower():
                    extra += [f"torch.{member}", f"torch.nn.functional.{member}", f"torch.Tensor.{member}"]
    return list(dict.fromkeys([*forbidden, *extra]))
