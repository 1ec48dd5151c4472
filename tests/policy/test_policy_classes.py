"""Classes in a solution (jg_mcp.policy.classes, jg_mcp.policy.tables.CLASS_DUNDERS): a class body may define only the
dunder methods of its protocol, and no class is made at run time from names the scan cannot read: not by `type(cls)`
(a metaclass), a metaclass named or given, nor enum's functional API (red team, third audit: a class's own
`__setattr__` caught what functools.update_wrapper read from any object)."""

from __future__ import annotations

import pytest

from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.check import static_check
from tests.eval.eval_suite import goal_forbidden
from tests.eval.eval_suite import policy_reasons as reasons

R = Reason


@pytest.mark.parametrize(
    "name",
    [
        "__setattr__",
        "__getattr__",
        "__getattribute__",
        "__delattr__",
        "__get__",
        "__set__",
        "__delete__",
        "__set_name__",
        "__init_subclass__",
        "__class_getitem__",
        "__new__",
        "__reduce__",
        "__reduce_ex__",
        "__getstate__",
        "__setstate__",
        "__copy__",
        "__deepcopy__",
        "__dir__",
        "__instancecheck__",
        "__subclasscheck__",
        "__mro_entries__",
        "__cuda_array_interface__",
        "__array_interface__",
        "__dlpack__",
        "__fspath__",
        "__prepare__",
    ],
)
def test_a_class_may_define_only_the_protocol_dunders_that_do_not_intercept_access_or_creation(name):
    """A class body's dunder methods are an allow-list: an attribute hook (`__setattr__` caught what update_wrapper
    read from any object), a descriptor, a creation hook, a copy or pickling hook, or an interface that makes a
    tensor out of a raw address (`__cuda_array_interface__`) is refused, whatever the method does."""
    src = f"class Box:\n    @property\n    def {name}(self, *args):\n        return args\n"
    found = static_check(src, goal_forbidden("softmax"))
    assert any(f.reason == R.STATIC_DYNAMIC and name in f.detail for f in found), found


@pytest.mark.parametrize(
    "src",
    [
        "t = type(int)\nC = t('C', (), {'__setattr__': f})\n",
        "C = type(int)('C', (), {})\n",
        "def cls_of(x):\n    return type(x)\nC = cls_of(cls_of(1))('C', (), {})\n",
        "ts = [type(c) for c in (int, float)]\n",
        "class Eq:\n    def __eq__(self, o):\n        return False\nseen = type(int) == Eq()\n",
        "seen = type(int) in box\n",
        "import torch\nm = torch.autograd.function.FunctionMeta\n",
        "class B(metaclass=M):\n    pass\n",
        "import enum\nclass B(metaclass=type(enum.Enum)):\n    pass\n",
        "import enum\nE = enum.Enum('E', [('a', 1), (name, f)])\n",
        "import enum\nE = enum.IntFlag('E', names)\n",
        "import enum, functools\nmake = functools.partial(enum.Enum, 'E')\n",
        "import enum\nclass M(enum.Enum):\n    pass\nE = M('E', names)\n",
        "import enum\nclass M(enum.Enum):\n    X = lambda self: 0\n",
    ],
    ids=[
        "type-of-class-bound",
        "type-of-class-called",
        "type-through-a-function",
        "type-in-a-list",
        "type-compared-with-own-eq",
        "type-in-own-container",
        "metaclass-by-name",
        "metaclass-keyword",
        "enum-metaclass-keyword",
        "enum-functional",
        "flag-functional",
        "enum-as-a-value",
        "memberless-enum-called",
        "enum-with-only-a-function",
    ],
)
def test_a_class_made_at_run_time_from_names_is_refused(src):
    """`type(int)` is `type`: called with a namespace it makes a class with any dunder methods, as does a metaclass
    or enum's functional API (`enum.Enum("E", [("__setattr__", f)])`, or a member-less enum subclass called the same
    way). type(x) may be compared, a metaclass neither named nor given, an enum class derived from (with members) or
    tested against."""
    assert R.STATIC_DYNAMIC in reasons(src), src


HONEST_CLASSES = """import enum

import torch


class Mode(enum.Enum):
    FAST = enum.auto()
    SAFE = 2


@enum.unique
class Bits(enum.IntFlag):
    A = 1
    B = -2
    PAIR = (3, 4)


class Acc:
    def __init__(self, n):
        self.n = n

    def __call__(self, x):
        return x

    def __getitem__(self, i):
        return self.n

    def __iadd__(self, other):
        self.n += other
        return self


def kernel(a, b, mode: enum.Enum = Mode.FAST):
    if type(a) is not type(b) or type(a) in (int, float) or type(a) == type(b) and type(a) != float:
        raise TypeError("mismatch")
    if not isinstance(a, (type(b), torch.Tensor)) or not isinstance(mode, enum.Enum) or Mode(1) is not Mode.FAST:
        raise TypeError("mode")
    return a
"""


def test_honest_classes_enums_and_class_comparisons_pass():
    """Protocol dunders, enums that list their members (looked up by value), `type(a) is type(b)` and its `==` and
    `in` against classes."""
    assert static_check(HONEST_CLASSES, goal_forbidden("softmax")) == []
