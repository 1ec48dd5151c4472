"""The static policy (an allow-list, in the harness): forbidden APIs under every spelling, reflection and dynamic
code, and no false alarms on plain Triton; and the run-time record of forbidden operator families."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
import torch

from jg_mcp.eval.candidate.recorder import OpRecorder
from jg_mcp.eval.ops import family_members, forbidden_ops, in_family
from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.check import policy_text, static_check

FORBIDDEN = [
    "torch._scaled_mm",
    "torch.matmul",
    "torch.bmm",
    "torch.nn.functional.linear",
    "torch.Tensor.__matmul__",
    "torch.Tensor.mm",
]


CE = "import torch.utils.cpp_extension as ce\n"


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


NATIVE_REFUSED = "native code is refused"


@pytest.mark.parametrize(
    "src",
    [
        "from torch.utils.cpp_extension import load_inline\nm = load_inline(name='g', cpp_sources='int g();')\n",
        "import torch.utils.cpp_extension as ce\nm = ce.load_inline(name='axpy_ext', cpp_sources='', functions=['f'])",
        "import torch\nm = torch.utils.cpp_extension.load(name='x', sources=['a.cpp'])",
        "from torch.utils import cpp_extension\ne = cpp_extension.CppExtension('x', ['a.cpp'])",
        "from torch.utils.cpp_extension import CUDAExtension, BuildExtension\n",
        "import torch.utils.cpp_extension\n",
        "import torch\nb = getattr(torch.utils.cpp_extension, 'load_inline')\n",
        CE + "m = ce.load_inline(name='x', cpp_sources='', build_directory='/jg/c')",
        CE + "m = ce.load_inline(name='x', cpp_sources='', extra_cflags=['-wrapper', '/bin/sh,-c,id'])",
    ],
    ids=[
        "load-inline-plain",
        "load-inline-as-module",
        "load",
        "cpp-extension-class",
        "cuda-extension-and-build-extension",
        "import-only",
        "getattr-constant",
        "build-directory",
        "compiler-wrapper",
    ],
)
def test_native_builds_are_refused_as_a_class_however_they_are_reached(src):
    """A library loaded into the candidate's process reaches the whole interpreter through the Python C API (the red
    team's builds called `tensor.attr("mm")` and builtins' `__import__` with the recorder's dispatch keys excluded):
    every cpp_extension build is refused, honest or not, and the finding says to write Triton."""
    found = static_check(src, FORBIDDEN)
    assert Reason.STATIC_DYNAMIC in {f.reason for f in found}, [f.detail for f in found]
    assert any(NATIVE_REFUSED in f.detail and "Triton" in f.detail for f in found), [f.detail for f in found]


def test_the_policy_told_to_the_agent_names_the_allowed_modules():
    text = policy_text(FORBIDDEN)
    assert "torch, triton" in text and "reflection" in text and "triton.runtime.build" in text
    assert "Native code is refused" in text and "cpp_extension" in text


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


@pytest.mark.slow
def test_forbidden_ops_run_in_another_thread_are_recorded():
    """The recorder's process-wide kernels see every thread, not just the calling one (a hint: in the worker they
    run in the candidate's process). In a process of its own: the kernels stay registered for its life. The op is
    refused where it is recorded (at the backend key, before `linear` becomes an `addmm`)."""
    script = (
        "import threading, torch\n"
        "from jg_mcp.eval.candidate.recorder import OpRecorder\n"
        "from jg_mcp.eval.ops import forbidden_ops\n"
        "r = OpRecorder(forbidden_ops(['torch.mm']))\n"
        "r.install()\n"
        "a = torch.ones(2, 2)\n"
        "t = threading.Thread(target=lambda: torch.nn.functional.linear(a, a))\n"
        "t.start()\n"
        "t.join()\n"
        "print(sorted(set(r.seen)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert {"linear", "mm", "addmm"} & set(ast.literal_eval(done.stdout.strip())), done.stdout
    assert "forbidden family: refused" in done.stderr


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
    from jg_mcp.eval.candidate.recorder import OpRecorder
    from jg_mcp.eval.ops import forbidden_ops

    recorder = OpRecorder(forbidden_ops(["torch.mm"]))
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with torch.inference_mode(), recorder:
        out = call(a, b)
    assert torch.allclose(out, a @ b, atol=1e-5) and recorder.seen, "a matrix product ran unrecorded"


@pytest.mark.slow
def test_the_recorders_mode_does_not_import_torch_compile():
    """A TorchDispatchMode subclass's `__torch_dispatch__` is wrapped to keep Dynamo out, and that wrapper imports
    torch._dynamo at its first call: 1.2 s here, seconds more on the H200 host, in every candidate's first checked
    call. The recorder's mode opts out (nothing traces it) and still records. In a process of its own: nothing else
    may have imported torch._dynamo first."""
    script = (
        "import sys, torch\n"
        "from jg_mcp.eval.candidate.recorder import OpRecorder\n"
        "from jg_mcp.eval.ops import forbidden_ops\n"
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


@pytest.mark.slow
def test_the_static_check_is_linear_in_the_source():
    """Each `+` of a chain once re-folded the whole chain below it, looking for a constant string: quadratic in a
    chain's length (16 MiB of 320-deep `x+x+...` chains took 812 s). Judged by how the time grows, not by a
    machine's speed: the same number of `+` in chains four times as long takes about as long (four times, were it
    quadratic)."""
    import time

    def chains(depth: int, count: int) -> str:
        return ("def f(x):\n    return " + "+".join(["x"] * depth) + "\n") * count

    static_check(chains(8, 1), FORBIDDEN)  # the imports the check makes once

    def took(source: str) -> float:
        start = time.perf_counter()
        static_check(source, FORBIDDEN)
        return time.perf_counter() - start

    short = min(took(chains(80, 160)) for _ in range(2))
    long = min(took(chains(320, 40)) for _ in range(2))
    assert long < 2 * short, (short, long)


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


GEMM_FP8_FORBIDDEN = [
    "torch._scaled_mm",
    "torch.matmul",
    "torch.mm",
    "torch.bmm",
    "torch.addmm",
    "torch.einsum",
    "torch.nn.functional.linear",
    "torch.Tensor.__matmul__",
    "torch.Tensor.matmul",
    "torch.Tensor.mm",
]
MATCH_ESCAPE = '''\
"""GEMM with the forbidden torch.mm. The static check never sees a dunder, a private name or `mm`: attribute
names in a `match` class pattern (`case object(__globals__=g)`) are plain strings in the AST (MatchClass.kwd_attrs),
not Attribute nodes or Constant strings. With the builtins in hand, the run-time op recorder is switched off."""

import torch


def _anchor():
    pass


match _anchor:
    case object(__globals__=_g):
        pass

_b = _g["__builtins__"]
match _b:
    case dict():
        _imp = _b["__import__"]
    case object(__import__=_imp):
        pass

_sys = _imp("sys")
_ops = _sys.modules["jg_mcp.eval.candidate.recorder"]
_ops.OpRecorder.record = lambda self, name: None  # the recorder sees every aten op and records none

match _sys.modules["torch"]:  # the module under no name the scan knows
    case object(mm=_mm):  # torch.mm, named only in the pattern
        pass


def kernel(a, b, scale_a, scale_b):
    c = _mm(a.float(), b.float().t())
    return (c * scale_a * scale_b).to(torch.bfloat16)
'''


def findings_at(src: str, forbidden: list[str] = FORBIDDEN) -> set[tuple[Reason, int]]:
    return {(f.reason, int(f.detail.split(":")[0].removeprefix("line "))) for f in static_check(src, forbidden)}


def test_the_red_teams_match_pattern_escape_is_refused():
    """Red team (match_escape): names in a class pattern (`case object(__globals__=_g)`) are plain strings in the
    syntax tree, which the scan never read: the file reached `__import__`, switched the op recorder off and called
    torch.mm named only in a pattern, and was accepted. `match` is refused, and its names are checked as well."""
    found = findings_at(MATCH_ESCAPE, GEMM_FP8_FORBIDDEN)
    assert (Reason.STATIC_DYNAMIC, 12) in found  # match: refused syntax
    assert (Reason.STATIC_INTROSPECTION, 13) in found  # case object(__globals__=_g)
    assert (Reason.STATIC_INTROSPECTION, 16) in found  # _g["__builtins__"]
    assert (Reason.STATIC_INTROSPECTION, 20) in found  # case object(__import__=_imp)
    assert (Reason.STATIC_FORBIDDEN, 28) in found  # case object(mm=_mm)


MATCH = "match x:\n    case {}:\n        pass\n"


@pytest.mark.parametrize(
    ("src", "reason", "line", "name"),
    [
        ("y = x.__globals__", Reason.STATIC_INTROSPECTION, 1, "__globals__"),
        ("y = x._base", Reason.STATIC_DYNAMIC, 1, "_base"),
        ("y = x.gi_frame", Reason.STATIC_INTROSPECTION, 1, "gi_frame"),
        (MATCH.format("object(__globals__=g)"), Reason.STATIC_INTROSPECTION, 2, "__globals__"),
        (MATCH.format("object(_base=b)"), Reason.STATIC_DYNAMIC, 2, "_base"),
        (MATCH.format("object(mm=f)"), Reason.STATIC_FORBIDDEN, 2, "mm"),
        (MATCH.format("object(gi_frame=f)"), Reason.STATIC_INTROSPECTION, 2, "gi_frame"),
        (MATCH.format("object(__torch_function__=f)"), Reason.STATIC_SUBCLASS, 2, "__torch_function__"),
        (MATCH.format("object() as __builtins__"), Reason.STATIC_INTROSPECTION, 2, "__builtins__"),
        (MATCH.format("[*__builtins__]"), Reason.STATIC_INTROSPECTION, 2, "__builtins__"),
        (MATCH.format("{**__builtins__}"), Reason.STATIC_INTROSPECTION, 2, "__builtins__"),
        (MATCH.format("{'__builtins__': b}"), Reason.STATIC_INTROSPECTION, 2, "__builtins__"),
        ("y = __builtins__", Reason.STATIC_INTROSPECTION, 1, "__builtins__"),
        ("def f(__globals__):\n    pass", Reason.STATIC_INTROSPECTION, 1, "__globals__"),
        ("def f(a, /, __p__):\n    pass", Reason.STATIC_INTROSPECTION, 1, "__p__"),
        ("def f(*, __k__=1):\n    pass", Reason.STATIC_INTROSPECTION, 1, "__k__"),
        ("def f(*__v__, **__kw__):\n    pass", Reason.STATIC_INTROSPECTION, 1, "__v__"),
        ("def f(*__v__, **__kw__):\n    pass", Reason.STATIC_INTROSPECTION, 1, "__kw__"),
        ("f = lambda __builtins__: 0", Reason.STATIC_INTROSPECTION, 1, "__builtins__"),
        ("d = dict(__globals__=1)", Reason.STATIC_INTROSPECTION, 1, "__globals__"),
        ("class C(__init_subclass__=1):\n    pass", Reason.STATIC_INTROSPECTION, 1, "__init_subclass__"),
        ("import triton.language as tl\ny = tl.load(p, _semantic=s)", Reason.STATIC_DYNAMIC, 2, "_semantic"),
        ("import torch.__config__", Reason.STATIC_INTROSPECTION, 1, "__config__"),
        ("from functools import __builtins__ as B", Reason.STATIC_INTROSPECTION, 1, "__builtins__"),
        ("from typing.__x__ import y", Reason.STATIC_INTROSPECTION, 1, "__x__"),
        ("import torch as __builtins__", Reason.STATIC_INTROSPECTION, 1, "__builtins__"),
        ("from torch import nn as __torch_function__", Reason.STATIC_SUBCLASS, 1, "__torch_function__"),
        ("def __torch_dispatch__(*a):\n    pass", Reason.STATIC_SUBCLASS, 1, "__torch_dispatch__"),
        ("async def __torch_function__():\n    pass", Reason.STATIC_SUBCLASS, 1, "__torch_function__"),
        ("class TorchDispatchMode:\n    pass", Reason.STATIC_SUBCLASS, 1, "TorchDispatchMode"),
        ("class C:\n    def __del__(self):\n        pass", Reason.STATIC_DYNAMIC, 2, "__del__"),
        ("def f():\n    global __builtins__", Reason.STATIC_INTROSPECTION, 2, "__builtins__"),
        ("def f():\n    def g():\n        nonlocal __x__", Reason.STATIC_INTROSPECTION, 3, "__x__"),
        ("try:\n    pass\nexcept E as __builtins__:\n    pass", Reason.STATIC_INTROSPECTION, 3, "__builtins__"),
        ("y = x['__builtins__']", Reason.STATIC_INTROSPECTION, 1, "__builtins__"),
    ],
)
def test_every_name_in_the_syntax_tree_goes_through_the_name_rules(src, reason, line, name):
    """Each field of a node that holds a name rather than a node (attribute names, pattern names, parameter, keyword
    and import names, global names, handler names, ...) is checked like an attribute or a variable of that name."""
    found = static_check(src, FORBIDDEN)
    assert any(f.reason == reason and f.detail.startswith(f"line {line}:") and name in f.detail for f in found), [
        (f.reason, f.detail) for f in found
    ]


@pytest.mark.skipif(sys.version_info < (3, 12), reason="type parameters are Python 3.12 syntax")
@pytest.mark.parametrize("params", ["[__T__]", "[*__T__]", "[**__T__]"])
def test_a_type_parameters_name_goes_through_the_name_rules(params):
    found = static_check(f"def f{params}(x):\n    pass\n", FORBIDDEN)
    assert any(f.reason == Reason.STATIC_INTROSPECTION and "__T__" in f.detail for f in found)


@pytest.mark.parametrize(
    ("src", "reason"),
    [
        ("match x:\n    case 1:\n        pass", Reason.STATIC_DYNAMIC),
        ("async def f():\n    pass", Reason.STATIC_CONCURRENCY),
        ("def f():\n    x = await g()", Reason.STATIC_CONCURRENCY),
        ("def f():\n    return [a async for a in b]", Reason.STATIC_CONCURRENCY),
        ("try:\n    pass\nexcept* ValueError:\n    pass", Reason.SYNTAX),
    ],
    ids=["match", "async-def", "await", "async-comprehension", "except-star"],
)
def test_syntax_a_kernel_does_not_need_is_refused(src, reason):
    """`match` reads attributes by names the static check cannot all see (a class's `__match_args__`, set at run
    time); coroutines are a scheduler of their own; a kernel needs neither (if/elif, plain functions)."""
    assert reason in reasons(src)


def test_the_syntax_tables_name_real_nodes_fields_and_kinds():
    """A misspelt node type or field in the tables would leave real syntax refused or a name unchecked."""
    import ast

    from jg_mcp.policy import tables as t

    later = {"TypeAlias", "TypeVar", "ParamSpec", "TypeVarTuple"}  # Python 3.12 syntax
    known = t.ALLOWED_SYNTAX | set(t.REFUSED_SYNTAX)
    assert all(isinstance(getattr(ast, kind, None), type) for kind in known - later)
    assert not t.ALLOWED_SYNTAX & set(t.REFUSED_SYNTAX)
    kinds = {t.ATTRIBUTE, t.VARIABLE, t.DEFINITION, t.KEYWORD, t.IMPORTED, t.LITERAL}
    for kind, fields in t.NAME_FIELDS.items():
        assert set(fields.values()) <= kinds, kind
        if (node := getattr(ast, kind, None)) is not None:
            assert set(fields) <= set(node._fields), kind


def test_a_node_type_outside_the_allow_list_is_refused(monkeypatch):
    """Syntax the policy does not know (what a future Python adds) is refused, never skipped."""
    import jg_mcp.policy.check as policy

    monkeypatch.setattr(policy, "ALLOWED_SYNTAX", policy.ALLOWED_SYNTAX - {"Pass"})
    found = static_check("def f():\n    pass\n", FORBIDDEN)
    assert [(f.reason, f.detail.split(":")[0]) for f in found] == [(Reason.SYNTAX, "line 2")]
    assert "Pass" in found[0].detail


def test_a_node_of_a_kind_no_table_knows_is_refused():
    """A node type outside `ast` as this Python has it: refused, its fields unread (no table says what they hold)."""
    import ast

    from jg_mcp.policy.check import check_tree

    class Template(ast.expr):  # a future expression node, unknown to the tables
        _fields = ("values", "label")

    stmt = ast.Expr(value=Template(values=[ast.Constant("x")], label="__globals__"))
    tree = ast.fix_missing_locations(ast.Module(body=[stmt], type_ignores=[]))
    found = check_tree(tree, FORBIDDEN)
    assert [f.reason for f in found] == [Reason.SYNTAX] and "Template" in found[0].detail


def test_a_field_of_a_known_node_that_no_table_knows_is_refused(monkeypatch):
    """A name-valued field a future Python adds to a known node is refused until the tables say how to check it."""
    import ast

    from jg_mcp.policy.check import check_tree

    monkeypatch.setattr(ast.Pass, "_fields", ("label",))
    node = ast.Pass(lineno=1, col_offset=0)
    node.label = "__globals__"
    found = check_tree(ast.Module(body=[node], type_ignores=[]), FORBIDDEN)
    assert [f.reason for f in found] == [Reason.SYNTAX] and "Pass.label" in found[0].detail


@pytest.mark.parametrize(
    ("src", "reason"),
    [
        (
            "def _g():\n    yield _it.gi_frame.f_back\n_it = _g()\nG = next(_it).f_globals['torch']",
            Reason.STATIC_INTROSPECTION,
        ),
        ("def up(tb):\n    return tb.tb_frame.f_back", Reason.STATIC_INTROSPECTION),
        (
            "import triton\n@triton.jit\ndef _k(x):\n    pass\nm = _k.get_capture_scope()['torch'].sys.modules",
            Reason.STATIC_INTROSPECTION,
        ),
        ("import torch\ns = torch.package.sys_importer.import_module('sys')", Reason.STATIC_DYNAMIC),
        ("from torch.utils.collect_env import run\nr = run('id')", Reason.STATIC_PROCESS),
    ],
    ids=["generator-frame", "traceback-frame", "jit-capture-scope", "torch-package-importer", "collect-env-run"],
)
def test_frames_globals_and_importers_reached_without_a_dunder_are_refused(src, reason):
    """A generator's frame (`gi_frame.f_back.f_globals`) or a Triton function's globals (`get_capture_scope()`)
    hand over other code's globals, and so every module, with no dunder or private name; torch.package imports any
    module by name and torch.utils.collect_env runs shell commands."""
    assert reason in reasons(src)


@pytest.mark.parametrize(
    "src",
    [
        "def configs():\n    for b in (64, 128):\n        yield b\n",
        "n = sum(x for x in range(4) if x)\n",
        "class Acc:\n    def __init__(self, n):\n        self.n = n\n\n    def __call__(self, x):\n        return x\n",
        "def _launch(x, *, _block=64):\n    return x\n\n\ny = _launch(1, _block=128)\n",
        "if __name__ == '__main__':\n    pass\n",
        "def key(a, b):\n    return '__'.join([a, b])\n",
        "from __future__ import annotations\n",
    ],
    ids=[
        "generator",
        "generator-expression",
        "dunder-methods",
        "own-private-keyword",
        "main-guard",
        "separator",
        "future",
    ],
)
def test_honest_syntax_around_the_new_rules_is_allowed(src):
    assert reasons(src) == set()


def test_every_shipped_honest_solution_passes_the_static_check():
    """The known-good solutions and the demo's (the scripted client writes it for the axpy goal)."""
    import yaml

    from jg_mcp.commands.demo import SOLUTION
    from tests.eval.eval_suite import GOALS, REPO, SOLUTIONS

    demo = yaml.safe_load((REPO / "jg_mcp" / "demo_goal" / "axpy.yaml").read_text())["forbidden"]
    assert static_check(SOLUTION.read_text(), demo) == []
    for path in sorted(SOLUTIONS.glob("*/solution.py")):
        forbidden = yaml.safe_load((GOALS / f"{path.parent.name}.yaml").read_text())["forbidden"]
        assert static_check(path.read_text(), forbidden) == [], path


@pytest.mark.parametrize(
    "src",
    [
        "from triton.runtime.build import compile_module_from_src\nm = compile_module_from_src('int f;', 'm')",
        "import triton.runtime.build\nm = triton.runtime.build.compile_so_from_src('int f;', 'm', 'd')",
        "import triton\nc = triton.runtime.cache.get_cache_manager('k')",
        "from triton.runtime.autotuner import get_cache_manager\nc = get_cache_manager('k')",
        "import triton\nk = triton.compile('kernel.ttir')",
        "import triton\nd = triton.knobs.cache.dir",
        "import triton\nb = triton.backends.backends",
        "import triton\nf = triton.runtime.driver.active.utils.load_binary",
        "from triton.tools.link import link\nlink('a', 'b')",
    ],
    ids=[
        "build-module",
        "build-so",
        "cache-manager",
        "cache-manager-by-another-module",
        "compile-file",
        "knobs",
        "backends",
        "load-binary",
        "aot-link",
    ],
)
def test_triton_apis_that_build_load_or_place_code_are_refused(src):
    """Triton's own C builds, its cache (whose libraries the native check judges by the library rules only, for
    Triton's launchers), its compiler on text or files, its backends' drivers and its configuration: through any
    of them a solution places or loads code the eval does not judge. Reached under another module's name (the
    autotuner imports the cache's functions), the object is the same and refused too."""
    assert reasons(src) & {Reason.STATIC_DYNAMIC, Reason.STATIC_IO}, src


HONEST_TRITON = """import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4)], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def _k(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pass


def kernel(x):
    props = triton.runtime.driver.active.utils.get_device_properties(x.device.index or 0)
    grid = (min(props["multiprocessor_count"], triton.cdiv(x.numel(), 128)),)
    _k[grid](x, x.numel())
    d = TensorDescriptor.from_tensor(x, [triton.next_power_of_2(16)])
    return x if d is not None else x


if __name__ == "__main__":
    ms = triton.testing.do_bench(lambda: kernel(torch.ones(4)))
"""


def test_the_triton_an_honest_kernel_uses_passes():
    assert reasons(HONEST_TRITON) == set(), reasons(HONEST_TRITON)


@pytest.mark.parametrize(
    "src",
    [
        "import torch\ndef kernel(x):\n    x.numpy().tofile('/jg/cache/triton/k/cuda_utils.so')\n    return x",
        "import torch\nf = torch.Tensor.numpy",
        "import torch\nd = torch.utils.data.DataLoader([1], num_workers=1)",
        "from torch.utils.benchmark import Timer\nt = Timer('x + 1')",
        "import torch\ncu = torch.jit.CompilationUnit('def f(a):\\n    return a')",
        "import torch\ndef kernel(x):\n    s = x.untyped_storage().from_file('/jg/cache/a.so', True, 8)\n    return x",
        "import torch\ng = torch.autograd.grad(y, x)",
        "import torch\ndef kernel(x):\n    x.sum().backward()\n    return x.grad",
        "import torch\nd = torch.distributions.Categorical(logits=x)",
        "import torch\nm = torch.ao.nn.intrinsic.LinearReLU",
    ],
    ids=[
        "numpy-tofile",
        "numpy-method",
        "dataloader-workers",
        "benchmark-timer-text",
        "torchscript-text",
        "storage-from-file",
        "autograd-grad",
        "tensor-backward",
        "distributions",
        "ao-fused-modules",
    ],
)
def test_what_writes_files_builds_elsewhere_or_runs_code_out_of_sight_is_refused(src):
    """Every way found to put bytes at a chosen path (a numpy array's tofile: the Triton cache's libraries are
    judged by the library rules only), to run an operator in a process whose recorder never reports (DataLoader's
    workers) or to compile code from text."""
    assert reasons(src) & {Reason.STATIC_DYNAMIC, Reason.STATIC_IO, Reason.STATIC_CONCURRENCY}, src


@pytest.mark.parametrize(
    "src",
    [
        "import torch\nx = torch.linalg.solve_triangular(t, y, upper=False)",
        "import torch.nn.functional as F\nx = F.embedding_bag(i, w, mode='sum', per_sample_weights=a)",
        "import torch\nx = torch.triangular_solve(y, t)",
        "import torch\nx = torch.linalg.matrix_power(m, 2)",
        "import torch\nx = torch.lstm_cell(i, h, w1, w2)",
        "import torch\ny = x.cholesky_solve(t)",
        "import torch\nm = torch.nn.GRU(4, 4)",
        "import torch\nm = torch.nn.EmbeddingBag(4, 4, mode='sum')",
        "import torch\nx = torch.inner(a, b)",
        "import torch\nx = torch.cov(torch.cat([a, b]))",
        "import torch\nm = torch.nn.MultiheadAttention(4, 1)",
        "import torch\nm = torch.nn.TransformerEncoderLayer(4, 2)",
        "import torch\ny = torch._transformer_encoder_layer_fwd",
    ],
    ids=[
        "linalg-solve",
        "embedding-bag",
        "triangular-solve",
        "matrix-power",
        "lstm-cell",
        "cholesky-method",
        "gru-module",
        "embedding-bag-module",
        "inner",
        "cov",
        "multihead-attention",
        "transformer-layer",
        "transformer-native-op",
    ],
)
def test_library_ops_that_compute_a_matrix_product_under_another_name_are_forbidden(src):
    """A triangular solve of [[I, 0], [-A, I]] against [[B^T], [0]] is A B^T by BLAS trsm; embedding_bag's
    weighted sums are a product; linalg's matrix functions and the recurrent cells run GEMMs: all are the matrix
    product's family, statically and at run time."""
    assert Reason.STATIC_FORBIDDEN in reasons(src), src
    names = {"linalg_solve_triangular", "_embedding_bag", "triangular_solve", "_cudnn_rnn", "lstm_cell"}
    assert names <= {n for n in names if in_family(n, family_members(["torch.matmul"]))}


ATTENTION = ["torch.nn.functional.scaled_dot_product_attention"]
SOFTMAX = ["torch.softmax"]


@pytest.mark.parametrize(
    ("src", "forbidden"),
    [
        ("from torch.nn.attention.varlen import varlen_attn\ny = varlen_attn(q, k, v, c, c, s, s)", ATTENTION),
        ("import torch\ny = torch.nn.attention.varlen.varlen_attn(q, k, v, c, c, s, s)", ATTENTION),
        ("import torch.nn.attention.varlen as va\ny = va.varlen_attn(q, k, v, c, c, s, s)", SOFTMAX),
        ("from torch.nn.attention.bias import causal_lower_right\nm = causal_lower_right(4, 4)", ATTENTION),
        ("from torch.nn.attention import sdpa_kernel, SDPBackend\n", ATTENTION),
        ("from torch.nn import attention\n", SOFTMAX),
        ("import torch.nn.functional as F\ny = F.cross_entropy(x, t, reduction='none')", SOFTMAX),
        ("import torch.nn.functional as F\ny = F.linear_cross_entropy(x, w, t)", SOFTMAX),
    ],
    ids=[
        "varlen-imported",
        "varlen-dotted",
        "varlen-for-softmax",
        "attention-bias",
        "sdpa-kernel",
        "attention-namespace",
        "cross-entropy-for-softmax",
        "linear-cross-entropy-for-softmax",
    ],
)
def test_the_attention_namespace_is_the_attention_family_and_cross_entropy_is_a_softmax(src, forbidden):
    """torch.nn.attention as a whole belongs to the attention family (as torch.linalg to the matrix product's): its
    varlen_attn runs FlashAttention behind a custom op that no other member's name and no run-time recorder sees
    into. Forbidding softmax forbids attention and cross entropy (a row broadcast along a trailing dimension with
    targets 0..N-1 gives the row's whole -log_softmax)."""
    assert Reason.STATIC_FORBIDDEN in reasons(src, forbidden), src


@pytest.mark.parametrize(
    "src",
    [
        "import torch\nm = torch.nn.intrinsic.LinearReLU(a, b)",
        "import torch\nm = torch.quantization.quantize_dynamic(m)",
        "from torch.nn.quantized import FloatFunctional\n",
    ],
    ids=["intrinsic", "quantization", "quantized"],
)
def test_torch_ao_under_its_former_names_is_refused(src):
    assert Reason.STATIC_DYNAMIC in reasons(src), src


@pytest.mark.parametrize(
    "src",
    [
        "import torch\nf = torch.compile(lambda x: x, options={'cpp.cxx': ('sh', '-c', 'id')})",
        "import torch\nf = torch.compile(lambda x: x, **{'options': {}})",
        "import torch\nc = torch.compile\nf = c(lambda x: x)",
        "import torch\ntorch.compiler.load_cache_artifacts(b'')",
        "import torch\ntorch.onnx.export(m, (x,), 'a.onnx', external_data=True)",
        "import torch\np = torch.profiler.profile()",
        "import torch\np = torch.autograd.profiler.profile()",
    ],
    ids=[
        "compile-options",
        "compile-unpacked",
        "compile-as-value",
        "compiler-artifacts",
        "onnx-export",
        "profiler",
        "autograd-profiler",
    ],
)
def test_configuration_that_runs_programs_or_loads_compiled_code_and_file_exports_are_refused(src):
    """Inductor's options name the compiler it runs (any program), torch.compiler loads compiled artifacts from
    bytes, and ONNX and the profilers write files where they are told."""
    assert reasons(src) & {Reason.STATIC_DYNAMIC, Reason.STATIC_IO}, src


@pytest.mark.parametrize(
    "src",
    [
        "import torch\nf = torch.cuda.gds.GdsFile('/jg/cache/triton/x.so', 0)",
        "import torch\ntorch.cuda.tunable.set_filename('x.csv')",
        "import torch\ntorch.serialization.save({}, 'x')",
        "import torch\ntorch.classes.load_library('/usr/lib/x86_64-linux-gnu/libm.so.6')",
        "import torch\na = torch.cuda.memory.CUDAPluggableAllocator('/usr/lib/libx.so', 'alloc', 'free')",
        "import torch\ntorch.cuda.memory.change_current_allocator(a)",
        "import torch\nrt = torch.cuda.cudart()",
    ],
    ids=["gds-file", "tunable-file", "serialization", "classes-library", "pluggable-allocator", "allocator", "cudart"],
)
def test_files_at_chosen_paths_and_native_code_by_path_or_by_symbol_name_are_refused(src):
    """GPUDirect Storage writes a tensor's bytes to a file at a chosen path (a library placed in the Triton cache is
    code Triton loads), TunableOp and torch.serialization write files; torch.classes loads a library by path and a
    pluggable allocator calls C functions looked up by name in one; cudart hands out the raw CUDA runtime."""
    assert reasons(src) & {Reason.STATIC_DYNAMIC, Reason.STATIC_IO}, src


@pytest.mark.parametrize(
    "src",
    [
        "import os\nos.environ['TRITON_CACHE_MANAGER'] = 'this:CacheManager'",
        "import os\ndel os.environ['A']",
        "import os\nos.environ['A'] += 'x'",
        "import os\ne = os.environ",
        "from os import environ\nenviron['A'] = '1'",
        "import os\nfor os.environ['A'] in ['1']:\n    pass",
        "import os\n(x, *os.environ['A']) = (1, '2')",
    ],
    ids=["set", "del", "augmented", "bound", "from-import", "for-target", "starred-target"],
)
def test_the_environment_is_only_read(src):
    """Triton reads its knobs from the environment when it compiles (TRITON_CACHE_MANAGER imports any module): a
    solution may read one named variable, never write, delete or hold the mapping."""
    assert reasons(src) & {Reason.STATIC_IO, Reason.STATIC_MONKEYPATCH}, src


def test_reading_one_named_variable_still_passes():
    assert reasons("import os\nx = os.environ.get('A')\ny = os.environ['B']") == set()


def test_an_operator_is_judged_by_the_method_it_calls_however_it_is_spelt():
    """`c @= b` falls back to `__matmul__`: the augmented assignment is the forbidden operator too; other operators
    stay allowed on tensors."""
    aug = "def f(a, b):\n    c = a\n    c @= b\n    return c"
    assert Reason.STATIC_FORBIDDEN in reasons(aug)
    assert reasons("def f(a, b):\n    a += b\n    a *= 2\n    return a - b") == set()


def test_an_item_written_into_an_imported_modules_object_is_a_patch():
    assert Reason.STATIC_MONKEYPATCH in reasons("import triton\ntriton.language.__all__[0] = 'x'")
    assert reasons("def f(a):\n    a[0] = 1\n    d = {}\n    d['k'] = a\n    del d['k']\n    return a") == set()


@pytest.mark.parametrize(
    "goal, src",
    [
        ("softmax", "import torch\ndef kernel(x):\n    return torch.nn.Softmax2d()(x.t().unsqueeze(-1))"),
        ("fused_add_rmsnorm", "import torch\nm = torch.nn.InstanceNorm1d(4)"),
        ("fused_add_rmsnorm", "import torch\nm = torch.nn.BatchNorm1d(4)"),
        ("fused_add_rmsnorm", "import torch\nm = torch.nn.PairwiseDistance()"),
        ("fused_add_rmsnorm", "import torch\nm = torch.nn.CosineSimilarity()"),
    ],
    ids=["softmax2d", "instance-norm", "batch-norm", "pairwise-distance", "cosine-similarity"],
)
def test_a_module_is_judged_by_the_operator_its_camel_case_name_spells(goal, src):
    """Red team: `Softmax2d` computes a row softmax, and an instance norm of [x, -x] is an RMSNorm; split at capitals
    and digits, their names hold the forbidden family's words."""
    from jg_mcp.goals import load_goal
    from tests.eval.eval_suite import GOALS

    found = static_check(src, load_goal(GOALS / f"{goal}.yaml").goal.forbidden)
    assert Reason.STATIC_FORBIDDEN in {f.reason for f in found}, src


@pytest.mark.parametrize(
    "src",
    [
        "import triton\nd = triton.runtime.driver.active\nu = d.utils\nu.load_binary('k', b'', 0, 0)",
        "import triton\nl = triton.runtime.driver.active.launcher_cls(None, None)",
        "import triton\nd = triton.runtime.driver\nd.set_active(None)",
        "def f(ck):\n    ck.kernel = b'cubin'",
        "def f(k):\n    k.cache[0].clear()\n    k.fn = None",
    ],
    ids=["load-binary", "launcher", "set-active", "kernel-bytes", "attribute-of-an-argument"],
)
def test_gpu_code_triton_did_not_compile_cannot_be_loaded_through_its_runtime_objects(src):
    """Red team: Triton's loader reached through a name bound to its driver, and a CompiledKernel's `kernel` set to
    foreign cubin bytes before its first launch. Only self's, cls's and ctx's attributes may be assigned."""
    assert reasons(src) & {Reason.STATIC_DYNAMIC, Reason.STATIC_MONKEYPATCH}, src


def test_a_methods_own_attributes_and_the_drivers_properties_still_pass():
    ok = "import triton\nclass A:\n    def __init__(self):\n        self.n = triton.runtime.driver.active.utils"
    assert reasons(ok + ".get_device_properties(0)") == set()


def test_torch_compile_called_plainly_passes():
    assert reasons("import torch\nf = torch.compile(lambda x: x, mode='max-autotune', dynamic=False)") == set()


SELF_TEST = """import torch
import triton
import triton.language as tl


@triton.jit
def _copy(x, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i, mask=i < n), mask=i < n)


def kernel(x):
    out = torch.empty_like(x)
    _copy[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


if __name__ == "__main__":
    from torch.nn.functional import softmax

    x = torch.randn(4, 5000, device="cuda")
    torch.testing.assert_close(kernel(x).softmax(-1), torch.softmax(x, dim=-1))
    print(softmax(x, -1).sum())
"""
"""The red team's honest_softmax_with_selftest, shortened: a kernel, and a self-test that calls the library op."""


def test_a_self_test_under_the_main_guard_is_not_judged_and_the_report_is_told():
    """The eval imports the solution as `solution` (worker_commands.Worker.load), so `if __name__ == "__main__":`
    never runs: its body is not judged for forbidden names, and the notes say it was skipped (never a finding); a file
    that rebinds `__name__` has the block judged, and no such note."""
    notes: list[str] = []
    assert static_check(SELF_TEST, SOFTMAX, notes=notes) == []
    reversed_test = SELF_TEST.replace('if __name__ == "__main__":', 'if "__main__" == __name__:')
    assert static_check(reversed_test, SOFTMAX) == []
    (note,) = notes
    assert note.startswith("line 18:") and "not judged" in note and "never runs" in note
    rebound: list[str] = []
    assert static_check('__name__ = "__main__"\n' + SELF_TEST, SOFTMAX, notes=rebound) and rebound == []


@pytest.mark.parametrize(
    "src",
    [
        SELF_TEST + "else:\n    y = torch.softmax(x, -1)\n",
        SELF_TEST.replace('if __name__ == "__main__":', 'if __name__ == "__main__" and torch:'),
        SELF_TEST.replace('if __name__ == "__main__":', 'if __name__ != "__main__":'),
        SELF_TEST.replace('if __name__ == "__main__":', 'if __name__ == "solution":'),
        SELF_TEST.replace('if __name__ == "__main__":\n', 'def f():\n  if __name__ == "__main__":\n'),
        '__name__ = "__main__"\n' + SELF_TEST,
        SELF_TEST.replace("import torch\n", "import torch\nif True:\n    __name__ = '__main__'\n", 1),
    ],
    ids=["else-branch", "other-test", "not-equal", "other-name", "not-module-level", "rebound", "rebound-nested"],
)
def test_forbidden_calls_outside_an_exact_main_guard_or_in_a_file_that_rebinds_name_are_found(src):
    found = static_check(src, SOFTMAX)
    assert Reason.STATIC_FORBIDDEN in {f.reason for f in found}, [f.detail for f in found]


@pytest.mark.parametrize(
    "src",
    [
        "__name__ = '__main__'",
        "__name__ += ''",
        "__name__: str = '__main__'",
        "if (__name__ := '__main__'):\n    pass",
        "for __name__ in ['__main__']:\n    pass",
        "with f() as __name__:\n    pass",
        "try:\n    pass\nexcept E as __name__:\n    pass",
        "import torch as __name__",
        "from torch import __name__",
        "def f():\n    global __name__\n    __name__ = '__main__'",
        "del __name__",
        "def f(__name__):\n    pass",
        "f = lambda __name__: 0",
        "def __name__():\n    pass",
        "class C:\n    def __name__(self):\n        pass",
        "y = [0 for __name__ in x]",
        "__file__ = 'x'",
        "if __name__ == '__main__':\n    __name__ = 'x'",
    ],
    ids=[
        "assign",
        "augmented",
        "annotated",
        "walrus",
        "for",
        "with",
        "except",
        "import-as",
        "from-import",
        "global",
        "del",
        "parameter",
        "lambda",
        "def",
        "method",
        "comprehension",
        "file",
        "inside-the-guard",
    ],
)
def test_a_binding_of_the_modules_own_dunders_is_refused_wherever_it_stands(src):
    """`__name__` is never "__main__" at import only while nothing in the file rebinds it."""
    found = static_check(src, SOFTMAX)
    assert any("binds `__" in f.detail for f in found), [f.detail for f in found]


@pytest.mark.parametrize(
    ("src", "reason"),
    [
        ("if __name__ == '__main__':\n    match x:\n        case 1:\n            pass", Reason.STATIC_DYNAMIC),
        ("if __name__ == '__main__':\n    async def f():\n        pass", Reason.STATIC_CONCURRENCY),
        ("if __name__ == '__main__':\n    x = __builtins__", None),
    ],
    ids=["match", "async", "dunder-read"],
)
def test_syntax_under_the_main_guard_is_still_checked_but_names_are_not(src, reason):
    """Syntax the policy refuses or does not know is refused there too (a later Python's node could act at compile
    time on the whole module); names there are not judged (the block never runs)."""
    assert reasons(src, SOFTMAX) == ({reason} if reason else set())


def test_an_import_under_the_main_guard_names_nothing_outside_it():
    src = (
        "if __name__ == '__main__':\n    from torch import softmax\n\n\n"
        "def softmax(x):\n    return x\n\n\ny = softmax(1)\n"
    )
    assert static_check(src, SOFTMAX) == []


def test_all_may_be_bound_and_the_other_module_dunders_not_even_read():
    assert reasons("__all__ = ['kernel']") == set()
    for name in ("__builtins__", "__spec__", "__loader__", "__dict__"):
        assert Reason.STATIC_INTROSPECTION in reasons(f"x = {name}"), name


@pytest.mark.parametrize(
    "src",
    [
        "import torch.nn.functional as F\n\n\ndef g():\n    import math as F\n\n    return F.pi\n\n\n"
        "def kernel(x):\n    return F.softmax(x, -1)\n",
        "import math as F\n\n\ndef kernel(x):\n    F = x.float()\n    return F.softmax(-1)\n",
        "import math as F\n\n\ndef kernel(x, F):\n    return F.softmax(-1)\n",
    ],
    ids=["another-import", "assigned", "parameter"],
)
def test_a_name_an_import_binds_may_not_be_bound_otherwise(src):
    """The scan reads an imported name as its import everywhere in the file: another binding of it would hide what
    it stands for there (`F.softmax` read as `math.softmax`)."""
    assert Reason.STATIC_DYNAMIC in reasons(src, SOFTMAX), src


def test_the_same_import_in_several_places_passes():
    src = "import torch\n\n\ndef f():\n    import torch\n\n    return torch.empty(1)\n"
    assert reasons(src, SOFTMAX) == set()


RMS = ["torch.nn.functional.rms_norm", "torch.norm"]
LIBDEVICE_FALLBACK = (
    "try:\n    from triton.language.extra import libdevice\n"
    "except ImportError:\n    from triton.language.math import libdevice\n"
)


@pytest.mark.parametrize(
    "src",
    [
        "def f(input):\n    return input\n",
        "def f(x, type=None):\n    return type\n",
        "g = lambda input: input + 1\n",
        "def f(x):\n    type = 'row'\n    return [type for _ in x]\n",
        "def f(input):\n    def g():\n        return input\n    return g\n",
        "class E(ValueError):\n    def __init__(self, m):\n        super().__init__(m)\n",
        "class C:\n    __slots__ = ('a', 'b')\n",
        "import collections\nP = collections.namedtuple('P', ['a'])\n"
        "p = P(1)._replace(a=2)\nd = p._asdict()\nn = P._fields\nq = P._make([1])\n",
        "import os\nB = int(os.getenv('B', '1'))\n",
        "from os import getenv\nB = int(getenv('B', '1'))\n",
        "import torch\ntorch.set_float32_matmul_precision('high')\np = torch.get_float32_matmul_precision()\n",
        LIBDEVICE_FALLBACK,
        "import collections\nfrom dataclasses import dataclass, field\n@dataclass\nclass C:\n"
        "    d: dict = field(default_factory=collections.OrderedDict)\n",
        "import collections\nd = collections.defaultdict(collections.Counter)\n",
        "import triton.language as tl\nOK = hasattr(tl, 'range')\n",
        "import torch\nimport triton\nV = triton.__version__\nT = torch.__version__\n"
        "M = tuple(int(p) for p in triton.__version__.split('.')[:2])\n",
        "from triton import __version__ as tv\nM = tv.split('.')\n",
    ],
    ids=[
        "input-param",
        "type-param",
        "lambda-param",
        "type-assigned",
        "closure",
        "super-init",
        "slots",
        "namedtuple-api",
        "getenv",
        "getenv-from",
        "matmul-precision",
        "import-fallback",
        "stdlib-class-factory",
        "stdlib-class-arg",
        "hasattr-class",
        "version",
        "version-import",
    ],
)
def test_honest_idioms_the_fifth_audit_saw_refused_are_allowed(src):
    """Fifth pass (31 honest Triton solutions): names the policy refused where they are plainly harmless."""
    assert static_check(src, FORBIDDEN + RMS + SOFTMAX) == []


@pytest.mark.parametrize(
    ("src", "reason"),
    [
        ('def f(type=type):\n    return type("X", (), {})\n', Reason.STATIC_DYNAMIC),
        ("@type\ndef f(type):\n    return type\n", Reason.STATIC_DYNAMIC),
        ("def f(x: type):\n    type = 1\n    return type\n", Reason.STATIC_DYNAMIC),
        ("g = lambda x=input: x\n", Reason.STATIC_DYNAMIC),
        ("def f():\n    global type\n    type = 1\n    return type\n", Reason.STATIC_DYNAMIC),
        ("def f():\n    return type('X', (), {})\n", Reason.STATIC_DYNAMIC),
        ("class C:\n    type = 1\n    x = type('X', (), {})\n", Reason.STATIC_DYNAMIC),
        ("def f(type):\n    class C:\n        type = 1\n        x = type\n", Reason.STATIC_DYNAMIC),
        ("type = 1\nx = type\n", Reason.STATIC_DYNAMIC),
        ("def f(xs):\n    return [type for x in type(xs)]\n", Reason.STATIC_DYNAMIC),
        ("class C:\n    def f(self):\n        return super().__init_subclass__()\n", Reason.STATIC_INTROSPECTION),
        ("def f(x):\n    x.__init__(1)\n", Reason.STATIC_INTROSPECTION),
        ("class C:\n    def f(self, o):\n        return super(C, o).__init__()\n", Reason.STATIC_INTROSPECTION),
        ("super = f\nclass C:\n    def f(self):\n        super().__init__()\n", Reason.STATIC_INTROSPECTION),
        ("x = __slots__\n", Reason.STATIC_INTROSPECTION),
        ("def f(o):\n    o.__slots__ = ()\n", Reason.STATIC_INTROSPECTION),
        ("y = x._base\n", Reason.STATIC_DYNAMIC),
        ("import torch\nf = torch.return_types._make\n", Reason.STATIC_DYNAMIC),
        ('import os\nos.environ["X"] = "1"\n', Reason.STATIC_MONKEYPATCH),
        ("import os\ng = os.getenv\nv = g(name)\n", Reason.STATIC_DYNAMIC),
        ("import os\nv = os.getenv(*names)\n", Reason.STATIC_DYNAMIC),
        ("import os\nos.putenv('X', '1')\n", Reason.STATIC_IO),
        ("import torch\nn = torch.nn.utils.get_total_norm([x])\n", Reason.STATIC_FORBIDDEN),
        ("import torch\ny = x.matmul(w)\n", Reason.STATIC_FORBIDDEN),
        (
            "try:\n    import torch.nn.functional as F\nexcept ImportError:\n    import math as F\n"
            "def k(x):\n    return F.softmax(x, -1)\n",
            Reason.STATIC_FORBIDDEN,
        ),
        (
            "try:\n    import math as F\nexcept ImportError:\n    import torch.nn.functional as F\n"
            "def k(x):\n    return F.softmax(x, -1)\n",
            Reason.STATIC_FORBIDDEN,
        ),
        ("try:\n    import math as F\nexcept ImportError:\n    import torch as F\nG = F\n", Reason.STATIC_DYNAMIC),
        ("import torch.nn.functional as F\nimport math as F\ny = F.pi\n", Reason.STATIC_DYNAMIC),
        (LIBDEVICE_FALLBACK.replace("from triton.language.math import libdevice", "libdevice = None"), None),
        ("import torch\nT = torch.Tensor\n", Reason.STATIC_DYNAMIC),
        ("import triton.language as tl\nR = tl.range\n", Reason.STATIC_DYNAMIC),
        ("import torch\nok = hasattr(torch, 'softmax')\n", Reason.STATIC_FORBIDDEN),
        ("import torch\nok = hasattr(torch, 'sys')\n", Reason.STATIC_INTROSPECTION),
        ("import torch\nv = torch.__version__._cmp_wrapper\n", Reason.STATIC_DYNAMIC),
        ("import torch\nv = torch.__version__.__class__\n", Reason.STATIC_INTROSPECTION),
        ("import torch\nv = torch.Tensor.__version__\n", Reason.STATIC_INTROSPECTION),
        ("import torch\nv = torch.__spec__\n", Reason.STATIC_INTROSPECTION),
        ("import torch\n@torch.library.custom_op('m::f', mutates_args=())\ndef f(x):\n    return x\n", None),
    ],
    ids=lambda v: None if isinstance(v, str) else str(v),
)
def test_near_misses_of_the_fifth_audits_allowances_stay_refused(src, reason):
    """Each allowance is for the honest form only: a builtin named as a default, a decorator or in a class body, a
    dunder on anything but `super()`, env writes, a family op named `get_`, a name two imports bind used as either."""
    found = reasons(src, FORBIDDEN + RMS + SOFTMAX)
    assert found and (reason is None or reason in found), (src, found)


def test_the_agent_is_told_about_torch_library_and_where_a_self_test_goes():
    text = policy_text(SOFTMAX)
    assert "torch.library" in text and 'if __name__ == "__main__":' in text and "os.getenv" in text


def test_one_name_may_stand_for_a_few_fallback_imports_only():
    """The policy scans the file once per import a name stands for: a try with a hundred handlers, each importing
    something else as one name, would have made a hundred scans of the whole file."""
    modules = ["math", "functools", "itertools", "typing", "enum", "collections", "dataclasses"]
    many = "try:\n    import math as M\n" + "".join(f"except ImportError:\n    import {m} as M\n" for m in modules[1:])
    assert Reason.STATIC_DYNAMIC in reasons(many, FORBIDDEN)
    few = "try:\n    import math as M\nexcept ImportError:\n    import functools as M\n"
    assert not reasons(few, FORBIDDEN)
