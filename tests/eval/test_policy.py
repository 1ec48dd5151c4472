"""The static policy (an allow-list, in the harness): forbidden APIs under every spelling, reflection and dynamic
code, and no false alarms on plain Triton; and the run-time record of forbidden operator families."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from jg_mcp.eval.ops import OpRecorder, forbidden_ops
from jg_mcp.eval.policy import policy_text, static_check
from jg_mcp.eval.report import Reason

FORBIDDEN = [
    "torch._scaled_mm",
    "torch.matmul",
    "torch.bmm",
    "torch.nn.functional.linear",
    "torch.Tensor.__matmul__",
    "torch.Tensor.mm",
]


def reasons(src: str, forbidden: list[str] = FORBIDDEN) -> set[Reason]:
    return {f.reason for f in static_check(src, forbidden)}


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
        "y = a.bmm(b)",
        "import torch\ny = torch.tensordot(a, b, dims=1)",
        "y = a.dot(b)",
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
        ("exec('x = 1')", Reason.STATIC_DYNAMIC),
        ("import torch\ntorch.ops.aten.mm.default(a, b)", Reason.STATIC_DYNAMIC),
        ("import torch\ntorch._C.TensorBase.mm(a, b)", Reason.STATIC_DYNAMIC),
        ("import torch\ny = torch._log_softmax(x, -1, False)", Reason.STATIC_DYNAMIC),
        ("y = x._base", Reason.STATIC_DYNAMIC),
        ("k = kernel.__globals__", Reason.STATIC_INTROSPECTION),
        ("c = x.__class__.__mro__", Reason.STATIC_INTROSPECTION),
        ("import gc\ngc.get_objects()", Reason.STATIC_INTROSPECTION),
        ("import sys\nf = sys._getframe(1).f_locals", Reason.STATIC_INTROSPECTION),
        ("import threading\nthreading.Thread(target=f).start()", Reason.STATIC_CONCURRENCY),
        ("import torch\ns = torch.cuda.Stream()", Reason.STATIC_CONCURRENCY),
        ("import torch\nwith torch.cuda.stream(s):\n    pass", Reason.STATIC_CONCURRENCY),
        ("import os\nkeys = os.environ.items()", Reason.STATIC_IO),
        ("import os\nv = os.environ[name]", Reason.STATIC_IO),
        ("import os\nv = os.getenv(prefix + 'SEED')", Reason.STATIC_IO),
        ("import os\nos.listdir('.')", Reason.STATIC_IO),
        ("import pathlib\npathlib.Path('x').read_text()", Reason.STATIC_IO),
        ("import torch\ntorch.save(x, 'f')", Reason.STATIC_IO),
        ("f = open('x')", Reason.STATIC_IO),
        ("import numpy", Reason.STATIC_IO),
        ("import requests", Reason.STATIC_IMPORT),
        ("from . import helper", Reason.STATIC_IMPORT),
        ("import torch\ntorch.cuda.Event.elapsed_time = lambda s, e: 0.0", Reason.STATIC_MONKEYPATCH),
        ("import time", Reason.STATIC_IMPORT),
        ("import signal", Reason.STATIC_PROCESS),
        ("import torch\nclass T(torch.Tensor):\n    pass", Reason.STATIC_SUBCLASS),
        ("def f(:\n", Reason.SYNTAX),
    ],
)
def test_cheating_construct_is_flagged_with_its_reason(src, reason):
    assert reason in reasons(src)


def test_every_finding_names_its_line_and_what_to_do():
    found = static_check("import torch\n\nimport sys\n", FORBIDDEN)
    assert [f.detail for f in found] == [
        "line 3: imports `sys`: a solution may import only collections, dataclasses, enum, functools, itertools, "
        "math, os, torch, triton, typing"
    ]


def test_a_plain_triton_kernel_with_prose_naming_the_op_is_clean():
    src = '''"""A GEMM: like torch.matmul and torch._scaled_mm, but written by hand."""
import math
import os

import torch
import triton
import triton.language as tl

WIDEN = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def _k(a, b, c, n: tl.constexpr):
    i = tl.arange(0, n)
    tl.store(c + i, tl.sigmoid(tl.load(a + i)) * tl.dot(tl.load(a + i), tl.load(b + i)))


class Cache:
    def __init__(self):
        self._grid = {}


def kernel(a, b):
    c = torch.empty_like(a)
    _k[(triton.cdiv(a.numel(), 128),)](a, b, c, a.numel(), num_warps=4)
    return c.view(a.shape).contiguous()
'''
    assert static_check(src, FORBIDDEN + ["torch.Tensor.sigmoid"]) == []


def test_native_code_that_calls_a_library_is_refused():
    src = (
        "from torch.utils.cpp_extension import load_inline\n"
        "m = load_inline(name='g', cpp_sources='', cuda_sources='cublasGemmEx(h, a, b);', functions=['g'])\n"
    )
    assert Reason.STATIC_FORBIDDEN in reasons(src)
    clean = "from torch.utils.cpp_extension import load_inline\nm = load_inline(name='g', cpp_sources='int g();')\n"
    assert reasons(clean) == set()


def test_the_policy_told_to_the_agent_names_the_allowed_modules():
    text = policy_text(FORBIDDEN)
    assert "torch, triton" in text and "reflection" in text and "cuBLAS" in text


def test_a_forbidden_name_forbids_its_whole_operator_family_at_run_time():
    assert {"mm", "bmm", "addmm", "_scaled_mm", "linear"} <= forbidden_ops(["torch.matmul"])
    assert {"_softmax", "_log_softmax"} <= forbidden_ops(["torch.softmax"])
    assert "mm" not in forbidden_ops(["torch.softmax"])


def test_the_recorder_sees_every_spelling_of_a_forbidden_operator():
    import torch

    a = torch.ones(2, 2)
    recorder = OpRecorder(forbidden_ops(["torch.matmul"]))
    with recorder:
        torch.tensordot(a, a, dims=1)
        _ = a @ a
        torch.ops.aten.mm.default(a, a)
        torch.add(a, a)
    assert set(recorder.seen) == {"mm"} and len(recorder.seen) == 3
    torch.mm(a, a)
    assert len(recorder.seen) == 3


@pytest.mark.parametrize(
    "src",
    [
        "g = getattr\nimport sys\nf = g(sys, '_getframe')",
        "import torch\nops = [getattr]\nmm = ops[0](torch, 'mm')",
        "import functools\nf = functools.partial(getattr, x)",
        "import typing\ndef _s(x: \"__import__('sys')\"):\n    pass\nm = typing.get_type_hints(_s)['x']",
        "from typing import get_type_hints as hints\nS = 'sys'\ndef _s(x: S):\n    pass\nm = hints(_s)",
        "import typing\nr = typing.ForwardRef('sys')",
        "from functools import singledispatch\n@singledispatch\ndef f(x):\n    pass",
        "from typing import _eval_type",
        "def f(x: \"__import__('os').system('x')\"):\n    pass",
        "def f(x) -> 'eval(\"1\")':\n    pass",
        "y: \"__import__('os')\" = 1",
    ],
)
def test_dynamic_access_under_another_name_or_through_annotations_is_found(src):
    """getattr is allowed only as a direct call with a constant name; strings in annotations are scanned as the code
    that typing, functools and TorchScript evaluate them as, and the functions that evaluate them are refused."""
    assert Reason.STATIC_DYNAMIC in reasons(src)


def test_plain_annotations_and_constant_getattr_are_not_alarms():
    src = (
        "from __future__ import annotations\nimport typing\nimport torch\n"
        "def kernel(a: torch.Tensor, b: 'torch.Tensor', c: typing.Optional['torch.Tensor'] = None) -> list:\n"
        "    n: int = 1\n    return [getattr(torch, 'float32'), hasattr(a, 'shape')]\n"
    )
    assert reasons(src) == set()


def test_forbidden_ops_run_in_another_thread_are_recorded():
    """The recorder's process-wide kernels see every thread, not just the calling one (a hint: in the worker they
    run in the candidate's process). In a process of its own: the kernels stay registered for its life."""
    script = (
        "import threading, torch\n"
        "from jg_mcp.eval.ops import OpRecorder, forbidden_ops\n"
        "r = OpRecorder(forbidden_ops(['torch.mm']))\n"
        "r.install()\n"
        "a = torch.ones(2, 2)\n"
        "t = threading.Thread(target=lambda: torch.nn.functional.linear(a, a))\n"
        "t.start()\n"
        "t.join()\n"
        "print(sorted(set(r.seen)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert "mm" in done.stdout or "addmm" in done.stdout, done.stdout


@pytest.mark.parametrize(
    "call",
    [
        lambda a, b: torch.linalg.matmul(a, b),
        lambda a, b: torch.linalg.multi_dot([a, b]),
        lambda a, b: torch.chain_matmul(a, b),
        lambda a, b: torch.inner(a, b.t()),
    ],
    ids=["linalg.matmul", "linalg.multi_dot", "chain_matmul", "inner"],
)
def test_a_composite_op_is_recorded_by_what_it_runs_even_under_inference_mode(call):
    """Under inference_mode the dispatch mode sees a composite op (aten.linalg_matmul) by its own name, which no
    family lists: the recorder looks through it to the ops it is made of (aten.mm), whatever the spelling."""
    from jg_mcp.eval.ops import OpRecorder, forbidden_ops

    recorder = OpRecorder(forbidden_ops(["torch.mm"]))
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with torch.inference_mode(), recorder:
        out = call(a, b)
    assert torch.allclose(out, a @ b, atol=1e-5) and recorder.seen, "a matrix product ran unrecorded"


def test_the_recorders_mode_does_not_import_torch_compile():
    """A TorchDispatchMode subclass's `__torch_dispatch__` is wrapped to keep Dynamo out, and that wrapper imports
    torch._dynamo at its first call: 1.2 s here, seconds more on the H200 host, in every candidate's first checked
    call. The recorder's mode opts out (nothing traces it) and still records. In a process of its own: nothing else
    may have imported torch._dynamo first."""
    script = (
        "import sys, torch\n"
        "from jg_mcp.eval.ops import OpRecorder, forbidden_ops\n"
        "r = OpRecorder(forbidden_ops(['torch.mm']))\n"
        "a = torch.ones(2, 2)\n"
        "with torch.inference_mode(), r:\n"
        "    torch.linalg.matmul(torch.empty_like(a), a)\n"
        "print('mm' in r.seen, 'torch._dynamo' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["True", "False"], done.stdout


@pytest.mark.parametrize(
    ("src", "reason"),
    [
        ("import torch\nB = torch.sys.modules['builtins']\nB.exec('x = 1')", Reason.STATIC_INTROSPECTION),
        ("import torch\ntorch.sys.modules['builtins'].getattr(torch, 'mm')", Reason.STATIC_INTROSPECTION),
        ("import typing\nm = typing.sys.modules", Reason.STATIC_INTROSPECTION),
        ("from torch import os as o\no.system('x')", Reason.STATIC_IO),
        ("import torch\nf = torch.cuda.os.system", Reason.STATIC_IO),
        ("def f():\n    return t.sys\nimport torch as t", Reason.STATIC_INTROSPECTION),
        ("import os\no = os\npid = o.getpid()", Reason.STATIC_DYNAMIC),
        ("import torch\nt = torch\ns = t.cuda.Stream()", Reason.STATIC_DYNAMIC),
        ("import torch\nlib = [torch][0].library", Reason.STATIC_DYNAMIC),
        ("import torch\nms = [m.cuda for m in (torch,)]", Reason.STATIC_DYNAMIC),
        ("import torch\ndef f():\n    return torch", Reason.STATIC_DYNAMIC),
        ("import torch\nc = torch.cuda\ns = c.Stream()", Reason.STATIC_DYNAMIC),
        ("import torch\nS = torch.cuda.Stream\ns = S()", Reason.STATIC_DYNAMIC),
        ("import torch\nM = getattr(torch.overrides, 'TorchFunctionMode')", Reason.STATIC_SUBCLASS),
        ("import torch\nT = torch.Tensor\nclass S(T):\n    pass", Reason.STATIC_SUBCLASS),
        ("import torch\nclass S(*[torch.Tensor]):\n    pass", Reason.STATIC_SUBCLASS),
        ("def f(T):\n    class S(T):\n        pass\n    return S", Reason.STATIC_SUBCLASS),
        ("class M:\n    def __torch_function__(self, *args):\n        pass", Reason.STATIC_SUBCLASS),
        ("class M:\n    __torch_dispatch__ = staticmethod(f)", Reason.STATIC_SUBCLASS),
        ("def __torch_dispatch__(*a):\n    pass", Reason.STATIC_SUBCLASS),
    ],
)
def test_a_module_or_class_reached_through_an_allowed_one_is_checked_as_what_it_is(src, reason):
    """Chains are resolved step by step against the real modules (torch.sys is sys); a module or class is never
    bound to a name, passed or stored, so no alias escapes the checks; torch hooks are refused wherever defined."""
    assert reason in reasons(src)


def test_the_red_teams_policy_bypasses_are_refused():
    src = (
        "import torch\nimport os\n"
        "S = torch.sys\nB = S.modules['builtins']\nB.exec('import gc')\n"
        "o = os\npid = o.getpid()\nt = torch\nst = t.cuda.Stream\nlib = t.library\n"
        "M = getattr(t.overrides, 'TorchFunctionMode')\nT = t.Tensor\nclass Sub(T):\n    pass\n"
    )
    found = static_check(src, FORBIDDEN)
    lines = {int(f.detail.split(":")[0].removeprefix("line ")) for f in found}
    assert {3, 6, 8, 13} <= lines, [f.detail for f in found]


def test_honest_uses_of_classes_and_modules_are_not_alarms():
    src = (
        "import functools\nimport typing\nimport torch\nimport triton\nimport triton.language as tl\n"
        "from torch import nn\n"
        "class Cfg(typing.NamedTuple):\n    block: int\n"
        "class Base:\n    pass\n"
        "class Sub(Base):\n    pass\n"
        "@functools.lru_cache(maxsize=None)\ndef configs() -> list:\n"
        "    return [triton.Config({'B': 64}, num_warps=4)]\n"
        "@triton.jit\ndef _k(x, n: tl.constexpr):\n    pass\n"
        "def kernel(a: typing.Optional[torch.Tensor], b: 'torch.Tensor') -> torch.Tensor:\n"
        "    assert isinstance(a, (torch.Tensor, int))\n"
        "    d = torch.float16 if a.dtype == torch.half else torch.bfloat16\n"
        "    return torch.empty(a.shape, dtype=d, device=a.device) + torch.zeros_like(b)\n"
    )
    assert static_check(src, FORBIDDEN + ["torch.sigmoid", "torch.logsumexp"]) == []


@pytest.mark.parametrize(
    "src",
    [
        "def helper(x):\n    return " + "+".join(["x"] * 600) + "\n",
        "def helper(x):\n    return " + "+".join(["'a'"] * 3000) + "\n",
        "x = a" + ".b" * 5000 + "\n",
        "def f(x: '" + "+".join(["x"] * 3000) + "'):\n    pass\n",
        "x = (" * 150 + "1" + ")" * 150 + "\n",
        "x = [" * 1000 + "]" * 1000 + "\n",
        "x = 1\x00\n",
    ],
    ids=["deep-sum", "deep-string-sum", "long-chain", "deep-annotation", "nested-parens", "nested-lists", "nul"],
)
def test_the_static_check_never_raises(src):
    """Too deep or odd code is a finding or clean, never an exception that leaves the harness without a report."""
    static_check(src, FORBIDDEN)


def test_a_source_above_the_size_bound_is_refused_before_parsing():
    found = static_check("x = 1\n" * 300_000, FORBIDDEN)
    assert [f.reason for f in found] == [Reason.SYNTAX] and "MiB" in found[0].detail


def test_the_static_check_is_linear_in_the_source():
    """Each `+` of a chain once re-folded the whole chain below it, looking for a constant string: quadratic (16 MiB
    of 320-deep `x+x+...` chains took 812 s). 300 such chains (0.2 MiB) took 18 s; a second or two now."""
    import time

    chain = "def f(x):\n    return " + "+".join(["x"] * 320) + "\n"
    start = time.perf_counter()
    static_check(chain * 300, FORBIDDEN)
    assert time.perf_counter() - start < 10


@pytest.mark.parametrize(
    ("src", "forbidden"),
    [
        ("import torch\nimport torch.nn.functional as F\ny = torch.exp(F.logsigmoid(g))", ["torch.sigmoid"]),
        ("import torch\ny = torch.special.expit(g)", ["torch.nn.functional.silu"]),
        ("import torch\ny = torch.nn.LogSigmoid()(g)", ["torch.sigmoid"]),
        ("import torch\ny = torch.logcumsumexp(x, dim=-1)[:, -1]", ["torch.logsumexp"]),
        ("y = x.logcumsumexp(-1)", ["torch.logsumexp"]),
    ],
)
def test_an_op_whose_name_contains_a_forbidden_leaf_is_in_its_family(src, forbidden):
    assert Reason.STATIC_FORBIDDEN in reasons(src, forbidden)


def test_the_recorder_sees_ops_whose_names_contain_a_forbidden_leaf():
    recorder = OpRecorder(forbidden_ops(["torch.sigmoid"]))
    lse = OpRecorder(forbidden_ops(["torch.logsumexp"]))
    x = torch.randn(4, 4)
    with recorder, lse:
        torch.nn.functional.logsigmoid(x)
        torch.logcumsumexp(x, dim=-1)
        torch.exp(x)
    assert "log_sigmoid_forward" in recorder.seen and "exp" not in recorder.seen
    assert "logcumsumexp" in lse.seen


SWIGLU_FORBIDDEN = ["torch.compile", "torch.nn.functional.silu", "torch.sigmoid"]


@pytest.mark.parametrize(
    ("src", "forbidden"),
    [
        ("import torch\nc = torch.compiler.compile(len)\n", SWIGLU_FORBIDDEN),
        ("import torch.nn.functional as F\ndef k(a, b):\n    return F.conv1d(a, b)\n", ["torch.matmul"]),
        ("import torch.nn.functional as F\ndef k(x):\n    return F.normalize(x, dim=-1)\n", ["torch.rms_norm"]),
    ],
    ids=["compile-under-another-namespace", "matmul-as-convolution", "rms_norm-as-normalize"],
)
def test_a_forbidden_api_under_another_torch_name_or_as_a_library_relative_is_refused(src, forbidden):
    """Red team, fourth pass: each was accepted. A forbidden torch name's leaf is forbidden in every torch namespace
    (and any name reaching the same object); a convolution is a library matrix product, a normalisation a norm."""
    assert Reason.STATIC_FORBIDDEN in reasons(src, forbidden)


def test_a_finalizer_is_refused():
    """`__del__` runs when the interpreter chooses, after the timed call: it could queue GPU work that the freeze of
    the candidate's processes does not stop, beside the baselines' timed calls."""
    src = "class Tail:\n    def __del__(self):\n        pass\n"
    assert Reason.STATIC_DYNAMIC in reasons(src)


@pytest.mark.parametrize(
    "src",
    [
        "import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x):\n        return x\n",
        "import torch\nclass M(torch.nn.Module):\n    pass\n",
        "class ShapeError(ValueError):\n    pass\n\n\nclass Plain(object):\n    pass\n",
        "from typing import Optional, Tuple\nimport torch\nPair = Tuple[torch.Tensor, torch.Tensor]\n"
        "Maybe = Optional[torch.Tensor]\n",
        "import torch\nOut = torch.Tensor | None\n",
        "import typing\nimport torch\ndef k(x):\n    return typing.cast(torch.Tensor, x)\n",
        "def k(a, b):\n    if type(a) is not type(b):\n        raise TypeError('mismatch')\n    return a\n",
        'NAME = "swiglu_silu_mul"\n',
    ],
    ids=["autograd-function", "nn-module", "builtin-bases", "type-aliases", "union-alias", "cast", "type-of", "name"],
)
def test_honest_idioms_the_red_team_saw_refused_are_allowed(src):
    """Fourth pass: common honest code the policy refused (a false rejection is as bad as a false acceptance)."""
    assert reasons(src, SWIGLU_FORBIDDEN) == set()


def test_a_tensor_subclass_or_a_class_made_by_type_stays_refused():
    assert Reason.STATIC_SUBCLASS in reasons("import torch\nclass T(torch.Tensor):\n    pass\n")
    assert Reason.STATIC_DYNAMIC in reasons("T = type('T', (object,), {})\n")
