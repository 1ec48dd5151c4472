"""What a solution may use of each allowed module, for the static policy (jg_mcp.policy.check): the members of the
standard library's modules and of Triton, as allow-lists. A module admitted whole admits every function in it, and
some take attribute names as arguments (functools.update_wrapper reads `getattr(obj, name)` and writes
`setattr(box, name, value)` for names spelt at run time): reflection that no rule on the file's own names can see.
So a member is allowed only if it is listed, whatever name reaches it: judged by its module when a dotted name
spells it (`functools.update_wrapper`, `typing.collections`) and by the module that defines it when another module
re-exports it (`triton.language.core.wraps`, `triton.runtime.jit.ir`, the compiler's C++ bindings). torch has its
own rules (the refused parts, private names, operator families), `os` its environment reads, and math (numeric
functions) and `__future__` (compiler flags) are allowed whole."""

from __future__ import annotations

import ast
import functools
import types
from typing import Any

from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.classes import check_class_factory
from jg_mcp.policy.context import Context
from jg_mcp.policy.trusted import UNKNOWN, trusted

WRAPS = "functools.wraps"
"""Allowed only as `@wraps(fn)`, the innermost decorator of a `def` (wraps_as_decorator): with `assigned=` or applied
to an object of the file's choosing it is update_wrapper."""
MODULE_MEMBERS: dict[str, frozenset[str]] = {
    "functools": frozenset(
        ["cache", "lru_cache", "partial", "reduce", "cached_property", "total_ordering", "cmp_to_key", "wraps"]
    ),
    "typing": frozenset(
        """Any Optional Union Tuple List Dict Set FrozenSet Type Callable Sequence MutableSequence Mapping
        MutableMapping Iterable Iterator Generator Collection Hashable Sized Deque DefaultDict OrderedDict Counter
        TYPE_CHECKING NamedTuple TypedDict TypeVar ParamSpec Concatenate Generic Protocol Literal Final final ClassVar
        Annotated TypeAlias TypeGuard Required NotRequired NoReturn Never Self NewType AnyStr Text LiteralString
        SupportsInt SupportsFloat SupportsIndex cast overload assert_never""".split()
    ),
    "dataclasses": frozenset(
        """dataclass field fields replace asdict astuple is_dataclass InitVar KW_ONLY MISSING
        FrozenInstanceError""".split()
    ),
    "collections": frozenset(["namedtuple", "defaultdict", "OrderedDict", "deque", "Counter", "abc"]),
    "collections.abc": frozenset(
        """Callable Iterable Iterator Generator Sequence MutableSequence Mapping MutableMapping Set MutableSet
        Collection Container Hashable Sized Reversible KeysView ItemsView ValuesView""".split()
    ),
    "enum": frozenset(["Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "auto", "unique"]),
    "itertools": frozenset(
        """accumulate batched chain combinations combinations_with_replacement compress count cycle dropwhile
        filterfalse groupby islice pairwise permutations product repeat starmap takewhile tee zip_longest""".split()
    ),
    "triton": frozenset(
        """jit language autotune heuristics Config cdiv next_power_of_2 reinterpret set_allocator must_use_result
        constexpr_function aggregate JITFunction KernelInterface CompilationError OutOfResources TritonError
        InterpreterError errors runtime tools""".split()
    ),
}
"""By module, the members a solution may use. Triton's are its language and what launches it (jit, autotune,
heuristics, Config, the constexpr helpers, set_allocator for tensor descriptors' scratch, the error classes), with
runtime and tools judged further by tables.TRITON_REFUSED: not triton.testing (a binding of cuBLAS), the
compiler, backends, knobs, asynchronous compilation or Gluon. A self-test under the main guard may use any of them
(its names are not judged)."""
WHOLE_MODULES = frozenset({"math", "__future__"})
"""Allowed modules whose every member a solution may use: numeric functions and compiler flags."""
TRITON_PARTS = frozenset({"language", "runtime", "tools", "errors"})
"""Triton's allowed members that are modules: where an object a solution may use is defined (`triton.runtime.jit`)."""


@functools.cache
def allowed_ids() -> frozenset[int]:
    """The ids of every allowed member that resolves: reached under another name (`triton.CompilationError` is
    defined in triton.compiler, `functools.reduce` in _functools) it is the same allowed object."""
    found: set[int] = set()
    for module, members in MODULE_MEMBERS.items():
        try:
            real = trusted(module)
        except ImportError:  # a Triton without it: nothing of it to reach
            continue
        found.update(id(getattr(real, m)) for m in members if hasattr(real, m))
    return frozenset(found)


def member_refusal(module: str, member: str, dotted: str) -> str | None:
    """Why `module.member`, spelt `dotted`, may not be used, if the module's members are an allow-list that does not
    list it."""
    allowed = MODULE_MEMBERS.get(module)
    if allowed is None or member in allowed or member == "__version__":
        return None
    real = f"{module}.{member}"
    spelt = f"`{real}`" if dotted == real else f"`{dotted}` is `{real}`, which"
    return f"{spelt} is not among the members of {module} a solution may use ({listed(module)})"


def listed(module: str) -> str:
    return ", ".join(sorted(MODULE_MEMBERS[module], key=str.lower))


def home(obj: Any) -> str | None:
    """The module that defines a module, a class or a function of any kind (Python's, a builtin, a native binding's
    such as nanobind's): an object whose `__module__` is its own, not its class's. None for an instance or a bound
    method, judged by the attribute rules as its attributes are read (the driver's `utils`)."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    try:
        module = getattr(obj, "__module__", None)
        own = isinstance(obj, type) or module != vars(type(obj)).get("__module__")
    except Exception:  # noqa: BLE001 - a trusted object whose attributes fail has no home to judge
        return None
    if not own or not callable(obj) or isinstance(obj, types.MethodType):
        return None
    return module if isinstance(module, str) else None


def home_refusal(dotted: str, obj: Any) -> str | None:
    """Why an object reached as `dotted` may not be used: a module, class or function defined in a part of Triton
    outside the allowed ones, or a class or function defined in an allow-listed standard module without being one
    of its allowed members, whatever module re-exports it (such a module itself has its members judged at the next
    step: `torch.nn.modules.module.functools.update_wrapper`)."""
    where = home(obj)
    if where is None or id(obj) in allowed_ids():
        return None
    parts = where.split(".")
    what = where if isinstance(obj, types.ModuleType) else f"{where}.{getattr(obj, '__name__', '?')}"
    if parts[0] == "triton" and len(parts) > 1 and parts[1] not in TRITON_PARTS:
        parts_allowed = ", ".join(f"triton.{p}" for p in sorted(TRITON_PARTS))
        return f"`{dotted}` is `{what}`, outside the parts of Triton a solution may use ({parts_allowed})"
    if where in MODULE_MEMBERS and where != "triton" and not isinstance(obj, types.ModuleType):
        return f"`{dotted}` is `{what}`, not among the members of {where} a solution may use ({listed(where)})"
    return None


def wraps_as_decorator(node: ast.AST) -> bool:
    """`@wraps(fn)`: one positional argument, no keywords, the innermost decorator of a `def`, so the wrapper is
    the function the file defines (its attributes are set, fn's public metadata copied, nothing else)."""
    call = getattr(node, "parent", None)
    if not isinstance(call, ast.Call) or call.func is not node or call.keywords or len(call.args) != 1:
        return False
    if isinstance(call.args[0], ast.Starred):
        return False
    owner = getattr(call, "parent", None)
    return isinstance(owner, ast.FunctionDef) and bool(owner.decorator_list) and owner.decorator_list[-1] is call


def is_wraps(obj: Any) -> bool:
    return obj is functools.wraps


def check_members(ctx: Context, parts: list[str], node: ast.AST) -> None:
    """Each step of a dotted name: a member its module's allow-list does not name (the module the step reads,
    resolved: a module reached through another is itself, `typing.collections` is collections), and what the step
    reaches, by the module that defines it (home_refusal); functools.wraps, under any name, only as the plain
    decorator of a def. The first refused step is the finding. A class factory it reaches is judged by where it
    stands (classes.check_class_factory)."""
    prefix, base = parts[0], ctx.resolve(parts[0])
    for part in parts[1:]:
        module = base.__name__ if isinstance(base, types.ModuleType) else prefix if base is UNKNOWN else None
        prefix = f"{prefix}.{part}"
        why = member_refusal(module, part, prefix) if module is not None else None
        base = ctx.resolve(prefix)
        if why := why or home_refusal(prefix, base):
            ctx.add(Reason.STATIC_IMPORT, node, why)
            return
        if base is UNKNOWN and prefix not in MODULE_MEMBERS:
            break  # nothing further resolves, and no allow-list is spelt below it
    if isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
        check_class_factory(ctx, ".".join(parts), base, node)
    if is_wraps(base) and isinstance(node, (ast.Name, ast.Attribute, ast.Call)) and not wraps_as_decorator(node):
        ctx.add(
            Reason.STATIC_DYNAMIC,
            node,
            f"`{'.'.join(parts)}` is functools.wraps, allowed only as `@wraps(fn)` directly on a def (one "
            "argument, no keywords, the innermost decorator): otherwise it sets attributes named at run time",
        )
