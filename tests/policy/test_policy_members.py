"""The static policy's allow-lists of what a solution may use of an allowed module (the standard library's members,
Triton's): the red team's third-audit findings (reflection through functools.update_wrapper, cuBLAS through
triton.testing, a GEMM through attention's log-sum-exp, whose rules tests/policy/test_policy_classes.py and
test_policy_families.py test), their near misses, and the honest spellings that stay allowed."""

from __future__ import annotations

import pytest

from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.check import policy_text, static_check
from jg_mcp.policy.members import MODULE_MEMBERS, WHOLE_MODULES
from jg_mcp.policy.tables import ALLOWED_MODULES
from tests.eval.eval_suite import HACKS, goal_forbidden
from tests.eval.eval_suite import policy_reasons as reasons

R = Reason


@pytest.mark.parametrize(
    ("name", "goal", "expected"),
    [
        ("reflection_through_update_wrapper", "softmax", {R.STATIC_IMPORT, R.STATIC_DYNAMIC}),
        ("gemm_through_triton_testing_cublas", "gemm_bf16", {R.STATIC_IMPORT}),
        ("gemm_through_varlen_attention", "gemm_bf16", {R.STATIC_FORBIDDEN}),
    ],
)
def test_the_red_teams_third_audit_hacks_are_refused_statically(name, goal, expected):
    """The static check is the decider: each of these ran its library op (or emptied the recorder) once accepted."""
    found = reasons((HACKS / name / "solution.py").read_text(), goal)
    assert expected <= found, found


@pytest.mark.parametrize(
    "src",
    [
        "import functools\ndef f(box, obj, name):\n    functools.update_wrapper(box, obj, assigned=(name,))\n",
        "from functools import update_wrapper\n",
        "import functools as ft\nu = ft.update_wrapper\n",
        "import functools\nu = getattr(functools, 'update_wrapper')\n",
        "import functools\nv = functools.WRAPPER_ASSIGNMENTS\n",
        "import functools\np = functools.partialmethod(f)\n",
        "from typing import get_type_hints as hints\nh = hints(f)\n",
        "import typing\nc = typing.collections\n",
        "import typing\nc = typing.runtime_checkable\n",
        "import dataclasses\nC = dataclasses.make_dataclass('C', ['a'])\n",
        "import collections\nd = collections.UserDict()\n",
        "import enum\nM = enum.EnumMeta\n",
        "import collections.abc\nc = collections.abc.Buffer\n",
    ],
    ids=[
        "update-wrapper",
        "update-wrapper-import",
        "update-wrapper-alias",
        "update-wrapper-getattr",
        "wrapper-assignments",
        "partialmethod",
        "get-type-hints-alias",
        "module-through-typing",
        "runtime-checkable",
        "make-dataclass",
        "user-dict",
        "enum-metaclass",
        "abc-unlisted",
    ],
)
def test_a_standard_library_member_outside_the_allow_list_is_refused_and_named(src):
    """An allowed module's members are an allow-list: a library function that reads or writes attributes named at
    run time (update_wrapper) is reflection however it is reached. The finding names the member and the ones a
    solution may use."""
    found = static_check(src, goal_forbidden("softmax"))
    assert R.STATIC_IMPORT in {f.reason for f in found}, found
    assert any("may use" in f.detail for f in found if f.reason == R.STATIC_IMPORT), found


@pytest.mark.parametrize(
    "src",
    [
        "import functools\ndef deco(fn):\n    @functools.wraps(fn, assigned=names)\n    def w(*a):\n"
        "        return fn(*a)\n    return w\n",
        "import functools\ndef deco(fn):\n    @functools.wraps(fn, ('x',))\n    def w(*a):\n"
        "        return fn(*a)\n    return w\n",
        "import functools\ndef g():\n    pass\nh = functools.wraps(f)(g)\n",
        "import functools\nw = functools.wraps(f)\n",
        "import functools\nclass C:\n    pass\n@functools.wraps(f)\n@C\ndef g():\n    pass\n",
        "import functools\n@functools.wraps(f)\nclass C:\n    pass\n",
        "from triton.language.core import wraps\nw = wraps(f, assigned=names)\n",
        "import torch\nw = torch.optim.lr_scheduler.wraps(f, assigned=names)(box)\n",
    ],
    ids=[
        "assigned-keyword",
        "assigned-positional",
        "called-on-a-value",
        "bound",
        "outer-decorator",
        "class-decorator",
        "through-triton",
        "through-torch",
    ],
)
def test_wraps_is_allowed_only_as_the_plain_decorator_of_a_function(src):
    """functools.wraps(fn, assigned=...) is update_wrapper: reached under any name, only `@wraps(fn)` directly on a
    `def` (the innermost decorator: it copies fn's public metadata onto a function the file defines) is allowed."""
    assert reasons(src) & {R.STATIC_DYNAMIC, R.STATIC_IMPORT}, src


HONEST_STDLIB = """from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import itertools
import math
from collections import OrderedDict, defaultdict, namedtuple
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, NamedTuple, Optional, Tuple, Union, cast

if TYPE_CHECKING:
    from typing import Iterator

Pair = namedtuple("Pair", ["a", "b"])


class Mode(enum.Enum):
    FAST = enum.auto()
    SAFE = enum.auto()


class Tile(NamedTuple):
    m: int
    n: int


@dataclass(frozen=True)
class Plan:
    tiles: Tuple[int, ...] = (64, 128)
    extra: Dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        pass


class Point:
    __slots__ = ("x", "y")


@functools.total_ordering
class Key:
    def __init__(self, v: int) -> None:
        self.v = v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key) and self.v == other.v

    def __lt__(self, other: Key) -> bool:
        return self.v < other.v

    def __hash__(self) -> int:
        return hash(self.v)

    def __repr__(self) -> str:
        return f"Key({self.v})"

    def __add__(self, other: Key) -> Key:
        return Key(self.v + other.v)

    def __radd__(self, other: int) -> Key:
        return Key(self.v + other)

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int) -> int:
        return self.v

    def __iter__(self) -> Iterator[int]:
        yield self.v

    def __contains__(self, x: int) -> bool:
        return x == self.v

    def __bool__(self) -> bool:
        return True

    def __call__(self, x: Any) -> Any:
        return x

    def __enter__(self) -> Key:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @functools.cached_property
    def doubled(self) -> int:
        return 2 * self.v


def timed(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        return fn(*args)

    return wrapper


@functools.lru_cache(maxsize=None)
def configs(n: int) -> list[tuple[int, int]]:
    return list(itertools.product((64, 128), (2, 4)))[: max(1, n)]


@functools.cache
def total(xs: Sequence[int]) -> Optional[int]:
    return functools.reduce(lambda a, b: a + b, xs, 0)


@timed
def kernel(x: Union[int, float]) -> float:
    counts: defaultdict[str, int] = collections.defaultdict(int)
    order = OrderedDict(a=1)
    window = collections.deque(maxlen=2)
    seen = collections.Counter("ab")
    plan = dataclasses.replace(Plan(), tiles=(32,))
    rows = dataclasses.asdict(plan)
    half = functools.partial(math.ldexp, x)
    key = functools.cmp_to_key(lambda a, b: a - b)
    pairs = list(itertools.chain.from_iterable([[1], [2]]))
    return cast(float, half(-1)) + len(counts) + len(order) + len(window) + len(seen) + len(rows) + len(pairs) + 0 * (
        key(1) is None
    )
"""


def test_the_standard_library_an_honest_solution_uses_passes():
    """Decorators (lru_cache, cache, wraps on a def, total_ordering, dataclass), annotations, named tuples, enums,
    the containers, itertools and math, and a class with the protocol dunders a helper type needs."""
    assert static_check(HONEST_STDLIB, goal_forbidden("softmax")) == []


@pytest.mark.parametrize(
    "src",
    [
        "import triton\nh = triton.testing.cublas()\n",
        "from triton.testing import cublas\n",
        "import triton.testing\n",
        "from triton import testing\n",
        "import triton\nm = triton.AsyncCompileMode\n",
        "import triton\nk = triton.FutureKernel\n",
        "import triton\nt = triton.MockTensor\n",
        "import triton.experimental.gluon\n",
        "import triton.profiler\n",
        "from triton.runtime.jit import ir\n",
        "import triton\nb = triton.runtime.jit.BaseBackend\n",
        "import triton\nv = triton.runtime.jit.get_cache_invalidating_env_vars()\n",
    ],
    ids=[
        "testing-cublas",
        "testing-import-from",
        "testing-import",
        "testing-module",
        "async-compile",
        "future-kernel",
        "mock-tensor",
        "gluon",
        "profiler",
        "ir-through-runtime",
        "backend-through-runtime",
        "native-through-runtime",
    ],
)
def test_a_triton_member_outside_the_allow_list_is_refused_however_it_is_reached(src):
    """Triton's members are an allow-list (its language, jit, autotune, heuristics, Config and helpers, runtime and
    tools with their refusals): triton.testing binds cuBLAS, and a module or class of Triton's outside the allowed
    parts is refused where another module re-exports it (the jit module holds the compiler's C++ IR bindings)."""
    assert R.STATIC_IMPORT in reasons(src, "gemm_bf16"), src


HONEST_TRITON = """import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4)], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def _k(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, libdevice.exp(tl.load(x_ptr + i, mask=i < n)), mask=i < n)


@triton.constexpr_function
def width(n):
    return triton.next_power_of_2(n)


def kernel(x):
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=x.device))
    props = triton.runtime.driver.active.utils.get_device_properties(x.device.index or 0)
    grid = (min(props["multiprocessor_count"], triton.cdiv(x.numel(), 128)),)
    try:
        _k[grid](x, x.numel())
    except (triton.OutOfResources, triton.CompilationError, triton.errors.TritonError):
        raise
    d = TensorDescriptor.from_tensor(x, [16])
    v = triton.__version__.split(".")
    return x if d is not None and v and isinstance(_k, triton.runtime.Autotuner) else x


if __name__ == "__main__":
    ms = triton.testing.do_bench(lambda: kernel(torch.ones(4)))
"""


def test_the_triton_an_honest_kernel_uses_passes():
    """jit, autotune, heuristics, Config, the helpers, the errors, libdevice, tensor descriptors, the driver's device
    properties; triton.testing.do_bench in a self-test under the main guard (never judged for names)."""
    assert static_check(HONEST_TRITON, goal_forbidden("gemm_bf16")) == []


def test_every_allowed_module_has_its_members_listed_or_is_judged_whole_by_its_own_rules():
    """A module added to the allowed ones must come with the members a solution may use (or be math, compiler
    flags, torch and os, which have rules of their own): an allowed module is never open by default."""
    assert set(ALLOWED_MODULES) == {m.split(".")[0] for m in MODULE_MEMBERS} | WHOLE_MODULES | {"torch", "os"}


def test_the_agent_is_told_the_members_and_class_dunders_it_may_use():
    text = policy_text(goal_forbidden("softmax"))
    assert "update_wrapper" not in text
    assert "lru_cache" in text and "triton.testing" in text and "__setattr__" in text and "__init__" in text
    assert "metaclass" in text and "type(x) only to compare classes" in text
