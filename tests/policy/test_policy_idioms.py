"""Honest idioms the static policy once refused (an audit's false rejections), each beside the hostile near-miss that
must stay refused: reading whether an environment variable is set, a function's or class's name and docstring, the
two-argument super(), nn.Parameter, attributes of objects the file made, and a private attribute of its own class."""

from __future__ import annotations

import pytest

from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.check import static_check
from tests.eval.eval_suite import goal_forbidden
from tests.eval.eval_suite import policy_reasons as reasons

HONEST = {
    "env_in": 'import os\nINTERPRET = "TRITON_INTERPRET" in os.environ\n',
    "env_not_in": 'import os\nif "TRITON_INTERPRET" not in os.environ:\n    pass\n',
    "fn_name": "def f(x):\n    return x\n\nNAME = f.__name__ + f.__qualname__\n",
    "fn_doc": 'def kernel(x):\n    """Doc."""\n    return x\n\nDOC = kernel.__doc__\n',
    "type_name": (
        "def kernel(x):\n"
        "    if not isinstance(x, int):\n"
        '        raise TypeError(f"expected int, got {type(x).__name__} {type(x).__qualname__}")\n'
        "    return x\n"
    ),
    "super_two_args": (
        "import torch\n\nclass Op(torch.nn.Module):\n    def __init__(self):\n        super(Op, self).__init__()\n"
    ),
    "parameter": (
        "import torch\n\n"
        "class Norm(torch.nn.Module):\n"
        "    def __init__(self, n):\n"
        "        super().__init__()\n"
        "        self.weight = torch.nn.Parameter(torch.ones(n))\n"
        "        self.scale = torch.nn.Buffer(torch.ones(1))\n"
    ),
    "function_attribute": ("def kernel(x):\n    return kernel.configs.get(x)\n\nkernel.configs = {}\n"),
    "own_instance_attribute": (
        "class Stats:\n"
        "    def __init__(self):\n"
        "        self.calls = 0\n\n"
        "_STATS = Stats()\n\n"
        "def kernel(x):\n"
        "    _STATS.calls += 1\n"
        "    return x\n"
    ),
    "own_dataclass_attribute": (
        "from dataclasses import dataclass, field\n\n"
        "@dataclass\n"
        "class Stats:\n"
        "    calls: int = 0\n"
        "    shapes: dict = field(default_factory=dict)\n\n"
        "_STATS = Stats()\n\n"
        "def kernel(x):\n"
        "    _STATS.calls += 1\n"
        "    _STATS.shapes = {}\n"
        "    return x\n"
    ),
    "own_class_private": (
        "class SoftmaxOp:\n    _configs = {}\n\ndef clear_cache():\n    SoftmaxOp._configs.clear()\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_an_honest_idiom_is_accepted(name):
    assert static_check(HONEST[name], goal_forbidden("softmax")) == []


NEAR_MISSES = {
    "env_iterated": ("import os\nKEYS = [k for k in os.environ]\n", Reason.STATIC_IO),
    "env_in_computed": ("import os\nname = 'X'\nHAS = name in os.environ\n", Reason.STATIC_IO),
    "env_in_chained": ('import os\nHAS = "A" in os.environ in os.environ\n', Reason.STATIC_IO),
    "env_left": ('import os\nHAS = os.environ in ["A"]\n', Reason.STATIC_IO),
    "env_write": ('import os\nos.environ["TRITON_CACHE_MANAGER"] = "x"\n', Reason.STATIC_IO),
    "env_copy": ("import os\nE = os.environ.copy()\n", Reason.STATIC_IO),
    "env_dict": ("import os\nE = dict(os.environ)\n", Reason.STATIC_IO),
    "name_stored": ("def f(x):\n    return x\n\nf.__name__ = 'softmax'\n", Reason.STATIC_INTROSPECTION),
    "doc_deleted": ("def f(x):\n    return x\n\ndel f.__doc__\n", Reason.STATIC_INTROSPECTION),
    "dict_read": ("def f(x):\n    return x\n\nD = f.__dict__\n", Reason.STATIC_INTROSPECTION),
    "type_bound": ("def kernel(x):\n    t = type(x)\n    return t\n", Reason.STATIC_DYNAMIC),
    "type_dict": ("def kernel(x):\n    return type(x).__dict__\n", Reason.STATIC_INTROSPECTION),
    "super_imported": (
        "import torch\n\nclass Op(torch.nn.Module):\n    def __init__(self):\n"
        "        super(torch.nn.Module, self).__init__()\n",
        Reason.STATIC_INTROSPECTION,
    ),
    "super_other_object": (
        "import torch\n\nclass Op(torch.nn.Module):\n    def __init__(self, x):\n        super(Op, x).__init__()\n",
        Reason.STATIC_INTROSPECTION,
    ),
    "object_setattr": (
        "class P:\n    def __init__(self):\n        object.__setattr__(self, 'b', 1)\n",
        Reason.STATIC_INTROSPECTION,
    ),
    "parameter_subclassed": (
        "import torch\n\nclass P(torch.nn.Parameter):\n    pass\n",
        Reason.STATIC_SUBCLASS,
    ),
    "parameter_as_value": ("import torch\n\nP = torch.nn.Parameter\n", Reason.STATIC_SUBCLASS),
    "tensor_subclass_called": (
        "import torch\n\nclass M(torch.overrides.TorchFunctionMode):\n    pass\n",
        Reason.STATIC_SUBCLASS,
    ),
    "imported_attribute": ("import torch\n\ntorch.x = 1\n", Reason.STATIC_MONKEYPATCH),
    "triton_attribute": ("import triton\n\ntriton.x = 1\n", Reason.STATIC_MONKEYPATCH),
    "jit_kernel_attribute": (
        "import triton\n\n@triton.jit\ndef _k(x):\n    pass\n\n_k.fn = None\n",
        Reason.STATIC_MONKEYPATCH,
    ),
    "decorated_function_attribute": (
        "import functools\n\n@functools.lru_cache\ndef f(x):\n    return x\n\nf.cache = None\n",
        Reason.STATIC_MONKEYPATCH,
    ),
    "function_rebound": (
        "import torch\n\ndef kernel(x):\n    return x\n\nkernel = torch.nn.Linear(1, 1)\nkernel.weight = None\n",
        Reason.STATIC_MONKEYPATCH,
    ),
    "imported_class_instance": (
        "import torch\n\nL = torch.nn.Linear(1, 1)\nL.weight = None\n",
        Reason.STATIC_MONKEYPATCH,
    ),
    "local_class_of_imported_base": (
        "import torch\n\nclass L(torch.nn.Linear):\n    pass\n\nclass M(L):\n    pass\n\n"
        "_M = M(1, 1)\n_M.weight = None\n",
        Reason.STATIC_MONKEYPATCH,
    ),
    "instance_bound_twice": (
        "import torch\n\nclass S:\n    pass\n\n_S = S()\n_S = torch.nn.Linear(1, 1)\n_S.weight = None\n",
        Reason.STATIC_MONKEYPATCH,
    ),
    "parameter_data": (
        "import torch\n\ndef kernel(w, x):\n    w.data = x\n    return x\n",
        Reason.STATIC_MONKEYPATCH,
    ),
    "private_of_import": ("import triton\n\nX = triton.Config._private\n", Reason.STATIC_DYNAMIC),
    "private_not_in_body": (
        "class SoftmaxOp:\n    _configs = {}\n\ndef f():\n    return SoftmaxOp._other\n",
        Reason.STATIC_DYNAMIC,
    ),
    "private_of_other_object": ("def f(x):\n    return x._configs\n", Reason.STATIC_DYNAMIC),
}


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_a_hostile_near_miss_stays_refused(name):
    src, reason = NEAR_MISSES[name]
    assert reason in reasons(src)
