"""The static policy: forbidden APIs however spelt, cheating constructs, and no false alarms on plain Triton."""

from __future__ import annotations

import pytest

from jg_mcp.eval.policy import install_wrappers, static_check
from jg_mcp.eval.report import Reason

FORBIDDEN = [
    "torch._scaled_mm",
    "torch.matmul",
    "torch.nn.functional.linear",
    "torch.Tensor.__matmul__",
    "torch.Tensor.mm",
]


def reasons(src: str) -> set[Reason]:
    return {f.reason for f in static_check(src, FORBIDDEN)}


@pytest.mark.parametrize(
    "src",
    [
        "import torch\ntorch._scaled_mm(a, b)",
        "import torch as t\nt.matmul(a, b)",
        "from torch import matmul as mm_\nmm_(a, b)",
        "from torch.nn import functional as F\nF.linear(x, w)",
        "import torch\ngetattr(torch, '_scaled' + '_mm')(a, b)",
        "import torch\ngetattr(torch, ''.join(['mat', 'mul']))(a, b)",
        "x = a @ b",
        "y = a.mm(b)",
        "name = 'torch._scaled_mm'",
    ],
)
def test_forbidden_api_is_found_however_it_is_spelt(src):
    assert Reason.STATIC_FORBIDDEN in reasons(src)


@pytest.mark.parametrize(
    ("src", "reason"),
    [
        ("import torch\nop = getattr(torch, name)", Reason.STATIC_DYNAMIC),
        ("import importlib\nm = importlib.import_module('torch')", Reason.STATIC_DYNAMIC),
        ("m = __import__('torch')", Reason.STATIC_DYNAMIC),
        ("import torch\ntorch.ops.aten.mm(a, b)", Reason.STATIC_DYNAMIC),
        ("import gc\ngc.get_objects()", Reason.STATIC_INTROSPECTION),
        ("import sys\nf = sys._getframe(1).f_locals", Reason.STATIC_INTROSPECTION),
        ("import threading\nthreading.Thread(target=f).start()", Reason.STATIC_CONCURRENCY),
        ("import torch\ns = torch.cuda.Stream()", Reason.STATIC_CONCURRENCY),
        ("import os\nkeys = os.environ.items()", Reason.STATIC_IO),
        ("import os\nv = os.environ[name]", Reason.STATIC_IO),
        ("import os\nv = os.getenv(prefix + 'SEED')", Reason.STATIC_IO),
        ("p = '/dev/shm/cache.pt'", Reason.STATIC_IO),
        ("f = open('x')", Reason.STATIC_IO),
        ("import torch\ntorch.cuda.Event.elapsed_time = lambda s, e: 0.0", Reason.STATIC_MONKEYPATCH),
        ("import time\ntime.perf_counter = lambda: 0.0", Reason.STATIC_MONKEYPATCH),
        ("import os\nos._exit(0)", Reason.STATIC_PROCESS),
        ("import torch\nclass T(torch.Tensor):\n    pass", Reason.STATIC_SUBCLASS),
        ("def f(:\n", Reason.SYNTAX),
    ],
)
def test_cheating_construct_is_flagged_with_its_reason(src, reason):
    assert reason in reasons(src)


def test_a_plain_triton_kernel_with_prose_naming_the_op_is_clean():
    src = '''"""A GEMM: like torch.matmul and torch._scaled_mm, but written by hand."""
import torch
import triton
import triton.language as tl


@triton.jit
def _k(a, b, c, n: tl.constexpr):
    i = tl.arange(0, n)
    tl.store(c + i, tl.sigmoid(tl.load(a + i)) * tl.load(b + i))


def kernel(a, b):
    c = torch.empty_like(a)
    _k[(1,)](a, b, c, a.numel())
    return c
'''
    assert static_check(src, FORBIDDEN + ["torch.Tensor.sigmoid"]) == []


def test_reading_one_named_environment_variable_is_allowed():
    src = "import os\nA = os.environ.get('TRITON_INTERPRET') == '1'\nB = os.getenv('X', '0')\nC = os.environ['Y']\n"
    assert static_check(src, FORBIDDEN) == []


def test_runtime_wrapper_records_forbidden_calls_only_while_armed():
    import torch

    recorder = install_wrappers(["torch.matmul", "torch.Tensor.__matmul__"])
    try:
        a = torch.ones(2, 2)
        recorder.armed = False
        torch.matmul(a, a)
        assert recorder.calls == []
        recorder.armed = True
        torch.matmul(a, a)
        _ = a @ a
        assert recorder.calls == ["torch.matmul", "torch.Tensor.__matmul__"]
    finally:
        recorder.restore()
    assert torch.matmul.__name__ == "matmul" and "recorded" not in repr(torch.Tensor.__matmul__)


def test_wrapped_op_packets_still_serve_torchs_own_namespace_walks():
    import torch
    from torch._export.utils import _collect_all_valid_cia_ops_for_aten_namespace

    recorder = install_wrappers(["torch.ops.aten._fused_rms_norm"])
    try:
        assert torch.ops.aten._fused_rms_norm.overloads()
        assert _collect_all_valid_cia_ops_for_aten_namespace()
        x = torch.randn(2, 8)
        torch.ops.aten._fused_rms_norm(x, [8], None, 1e-6)
        assert recorder.calls == ["torch.ops.aten._fused_rms_norm"]
    finally:
        recorder.restore()
    assert type(torch.ops.aten._fused_rms_norm).__name__ == "OpOverloadPacket"
