"""Dotted names in a solution's source, for the static policy (jg_mcp.policy.check): each dotted name rooted at an
import resolved step by step against the real, trusted modules (the candidate's code never runs; Context.resolve),
and judged by what it is and what it reaches: a forbidden API or its family, a private or refused torch part, native
builds, a module outside the allowed ones, a member outside its module's allow-list (members), a dynamic
builtin or evaluator under any name, a module or class used as a value."""

from __future__ import annotations

import ast
import builtins
import types
from typing import Any

from jg_mcp.eval.ops import in_family
from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.context import Rule
from jg_mcp.policy.members import check_members
from jg_mcp.policy.source_ast import contains, is_class_argument, is_getattr
from jg_mcp.policy.tables import (
    CATEGORY,
    DIRECT_CALLS,
    DYNAMIC_NAMES,
    ENV_READS,
    EVALUATORS,
    IO_MODULES,
    NATIVE_BUILDS,
    REFLECTION_CALLS,
    SUBCLASS_ATTRS,
    TORCH_REFUSED,
    TRITON_CODE_MODULES,
    TRITON_REFUSED,
)
from jg_mcp.policy.trusted import UNKNOWN, is_module_state, is_torch_machinery, trusted

STR_METHODS = frozenset(n for n in dir(str) if not n.startswith("_"))
"""The public methods of a string, such as a module's `__version__` (reads_version)."""
REFUSED_PARTS = {
    "torch": (
        TORCH_REFUSED,
        "streams, processes, files, by-name operators, code from text or bytes, derivatives and subclass machinery "
        "are refused",
    ),
    "triton": (
        TRITON_REFUSED,
        "Triton's compiler, builds, cache, drivers and configuration place or load code the eval does not judge: "
        "write triton.jit kernels",
    ),
}
"""The refused parts of each library, as a contiguous run of a dotted name's parts after its root, and why."""
NATIVE_REFUSED = (
    "native code is refused (torch.utils.cpp_extension, every builder): a library loaded into the candidate's process "
    "runs with the interpreter's and torch's full powers, beyond anything the eval can check; write the kernel in "
    "Triton (triton.jit)"
)
"""The finding's sentence for a native build (tables.NATIVE_BUILDS), under any name that reaches it."""


def refused_objects() -> dict[int, tuple[Reason, str]]:
    """Objects no dotted name may reach, by id: the dynamic builtins, `open`, the annotation evaluators."""
    found: dict[int, tuple[Reason, str]] = {}
    for name in DYNAMIC_NAMES | REFLECTION_CALLS:
        if hasattr(builtins, name):
            found[id(getattr(builtins, name))] = (Reason.STATIC_DYNAMIC, f"the builtin `{name}`")
    found[id(builtins.open)] = (Reason.STATIC_IO, "the builtin `open`")
    for dotted in EVALUATORS:
        module, _, name = dotted.rpartition(".")
        if (obj := getattr(trusted(module), name, None)) is not None:
            found[id(obj)] = (Reason.STATIC_DYNAMIC, f"`{dotted}`, which evaluates strings as code")
    for module, reason in TRITON_CODE_MODULES.items():
        try:
            found_module = trusted(module)
        except ImportError:  # a Triton without it: nothing of it to reach
            continue
        for name, obj in vars(found_module).items():
            if not name.startswith("_") and callable(obj) and getattr(obj, "__module__", None) == module:
                found[id(obj)] = (reason, f"`{module}.{name}`, which places or loads code the eval does not judge")
    return found


def made_here(node: ast.AST) -> bool:
    """The class a name reaches is called right there (`torch.nn.Parameter(w)`) or imported by name (`from torch.nn
    import Parameter`, each use then judged where the name is read): not bound, passed, stored or derived from."""
    parent = getattr(node, "parent", None)
    return isinstance(node, ast.ImportFrom) or (isinstance(parent, ast.Call) and parent.func is node)


def library_class(dotted: str, obj: type) -> bool:
    """A torch or triton class (reached through either, or defined in either): under another name it would escape
    the checks on its name and its attributes (a family's module class, torch.Tensor as a base). The standard
    library's classes (collections.OrderedDict as a default_factory) are plain values; what they reach is judged
    when it is reached (check_reach)."""
    home = str(getattr(obj, "__module__", None) or "").split(".")[0]
    return dotted.split(".")[0] in ("torch", "triton") or home in ("torch", "triton")


class DottedNames(Rule):
    """Every dotted name rooted at an import, wherever the file spells it (a name an import bound, an attribute chain,
    `getattr` with a constant name, an import; imports hands over the last): what it reaches, what it spells,
    and how it is used."""

    def visit_Attribute(self, node: ast.Attribute) -> None:
        """A chain rooted at an import (its attribute name is checked with the node's other names, syntax)."""
        if dotted := self.ctx.dotted(node):
            obj = self.check_reach(dotted, node)
            self.check_value(node, dotted, obj)
            if not isinstance(getattr(node, "parent", None), ast.Attribute):
                self.check_name(dotted, node)

    def visit_Name(self, node: ast.Name) -> None:
        if (dotted := self.ctx.aliases.get(node.id)) is not None:
            if not isinstance(getattr(node, "parent", None), ast.Attribute):
                self.check_name(dotted, node)
            if isinstance(node.ctx, ast.Load):
                self.check_value(node, dotted, self.check_reach(dotted, node))

    def visit_Call(self, node: ast.Call) -> None:
        """`getattr(x, NAME)` or `hasattr` with a constant NAME and x rooted at an import: the dotted name it reads
        (calls.Builtins judges the other getattrs)."""
        if (
            is_getattr(node)
            and self.ctx.const_str(node.args[1]) is not None
            and (dotted := self.ctx.dotted(node)) is not None
        ):
            self.check_name(dotted, node)
            reached = self.check_reach(dotted, node)
            if isinstance(node.func, ast.Name) and node.func.id == "getattr":  # hasattr answers a bool: nothing bound
                self.check_value(node, dotted, reached)

    def check_reach(self, dotted: str, node: ast.AST) -> Any:
        """What a dotted name reaches: a module outside the allowed ones (torch.sys is sys), a dynamic builtin or
        an evaluator (under any name), a function or class of a refused module, a torch mode class."""
        self.ctx.resolve_prefixes(dotted)
        obj = self.ctx.resolve(dotted)
        if obj is UNKNOWN or "." not in dotted:
            return obj
        if isinstance(obj, types.ModuleType):
            home = obj.__name__
        elif isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
            home = str(getattr(obj, "__module__", None))
        else:
            home = ""
        if home == f"torch.{NATIVE_BUILDS}" and not contains(dotted.split("."), NATIVE_BUILDS.split(".")):
            # a builder reached under another name (check_library_parts names the module's own)
            self.ctx.add(Reason.STATIC_DYNAMIC, node, f"`{dotted}`: {NATIVE_REFUSED}")
            return obj
        if isinstance(obj, types.ModuleType):
            root = obj.__name__.split(".")[0]
            if root not in self.ctx.allowed - {"os", "__future__"}:
                reason = Reason.STATIC_IO if root in IO_MODULES else CATEGORY.get(root, Reason.STATIC_IMPORT)
                self.ctx.add(reason, node, f"`{dotted}` is the module `{obj.__name__}`, which a solution may not use")
            return obj
        if id(obj) in self.ctx.refused:
            reason, what = self.ctx.refused[id(obj)]
            why = "" if reason == Reason.STATIC_FORBIDDEN else ": dynamic code and reflection are not allowed"
            self.ctx.add(reason, node, f"`{dotted}` is {what}{why}")
            return obj
        if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)) and dotted not in ENV_READS:
            root = str(getattr(obj, "__module__", None) or "").split(".")[0]
            if root in CATEGORY or root in IO_MODULES:
                reason = Reason.STATIC_IO if root in IO_MODULES else CATEGORY[root]
                self.ctx.add(reason, node, f"`{dotted}` comes from the module `{root}`, which a solution may not use")
        if isinstance(obj, type) and is_torch_machinery(obj) and not (is_module_state(obj) and made_here(node)):
            self.ctx.add(Reason.STATIC_SUBCLASS, node, f"tensor subclass or torch mode machinery: `{dotted}`")
        return obj

    def check_name(self, dotted: str, node: ast.AST) -> None:
        """A dotted name rooted at an imported module: forbidden APIs, private and refused torch parts."""
        parts = dotted.split(".")
        for bad in self.ctx.forbidden:
            leaf = bad.rsplit(".", 1)[-1]
            if dotted == bad or dotted.startswith(bad + "."):
                self.ctx.add(Reason.STATIC_FORBIDDEN, node, f"uses forbidden `{bad}` (as `{dotted}`)")
            elif bad.startswith("torch.") and parts[0] == "torch" and parts[-1] == leaf and len(leaf) > 3:
                self.ctx.add(Reason.STATIC_FORBIDDEN, node, f"`{dotted}` has the name of forbidden `{bad}` in torch")
        if parts[0] == "os" and dotted not in ("os", "os.environ", *ENV_READS):
            self.ctx.add(
                Reason.STATIC_IO,
                node,
                f"`{dotted}`: of `os` a solution may only read one named variable (os.environ.get('NAME'))",
            )
        if self.reads_version(parts):
            pass
        elif parts[0] in ("torch", "triton") and any(p.startswith("_") for p in parts[1:]):
            self.ctx.add(Reason.STATIC_DYNAMIC, node, f"private API `{dotted}`: use public torch and triton APIs")
        elif any(p.startswith("_") and not p.endswith("__") for p in parts[1:]):
            self.ctx.add(Reason.STATIC_DYNAMIC, node, f"private API `{dotted}`")
        if any(dotted == e or dotted.startswith(e + ".") for e in EVALUATORS):
            self.ctx.add(Reason.STATIC_DYNAMIC, node, f"`{dotted}` evaluates annotations (strings in them) as code")
        self.check_library_parts(dotted, parts, node)
        check_members(self.ctx, parts, node)
        if parts[-1] in SUBCLASS_ATTRS or dotted.startswith("torch.utils._python_dispatch"):
            self.ctx.add(Reason.STATIC_SUBCLASS, node, f"tensor subclass or torch mode machinery: `{dotted}`")

    def reads_version(self, parts: list[str]) -> bool:
        """A module's `__version__` (a string), or one public str method of it: `triton.__version__.split`."""
        if "__version__" not in parts:
            return False
        at = parts.index("__version__")
        rest = parts[at + 1 :]
        module = isinstance(self.ctx.resolve(".".join(parts[:at])), types.ModuleType) if at else False
        return module and (not rest or (len(rest) == 1 and rest[0] in STR_METHODS))

    def setting(self, parts: list[str]) -> bool:
        """A torch function that sets or reads a switch, not an operator, whatever words its name holds
        (`torch.set_float32_matmul_precision`): a module's function, not a Tensor method, named `is_` or `has_` (it
        answers a bool) anywhere in torch, or `set_` or `get_` in torch's own namespace or torch.backends (every one
        there a switch or its reading; elsewhere `get_` can compute: torch.nn.utils.get_total_norm is a norm)."""
        name, home = parts[-1], parts[:-1]
        if not isinstance(self.ctx.resolve(".".join(home)), types.ModuleType):
            return False
        if not isinstance(self.ctx.resolve(".".join(parts)), (types.FunctionType, types.BuiltinFunctionType)):
            return False
        settings = home == ["torch"] or home[:2] == ["torch", "backends"]
        return name.startswith(("is_", "has_")) or (settings and name.startswith(("set_", "get_")))

    def check_library_parts(self, dotted: str, parts: list[str], node: ast.AST) -> None:
        """The parts of torch and triton a dotted name reaches: a forbidden family's ops and namespace (torch.linalg),
        native builds and the rest of torch.utils, and the refused parts of each (TORCH_REFUSED, TRITON_REFUSED)."""
        if (
            parts[0] == "torch"
            and len(parts) > 1
            and in_family(parts[-1], self.ctx.members)
            and not self.setting(parts)
        ):
            self.ctx.add(Reason.STATIC_FORBIDDEN, node, f"`{dotted}` is a library op of a forbidden operator family")
        elif parts[0] == "torch" and any(
            p in self.ctx.members and isinstance(self.ctx.resolve(".".join(parts[: i + 1])), types.ModuleType)
            for i, p in enumerate(parts[1:-1], 1)
        ):
            self.ctx.add(
                Reason.STATIC_FORBIDDEN, node, f"`{dotted}` is in the namespace of a forbidden operator family"
            )
        if parts[0] == "torch" and contains(parts[1:], NATIVE_BUILDS.split(".")):
            self.ctx.add(Reason.STATIC_DYNAMIC, node, f"`{dotted}`: {NATIVE_REFUSED}")
        elif parts[:2] == ["torch", "utils"] and len(parts) > 2:
            self.ctx.add(
                Reason.STATIC_DYNAMIC,
                node,
                f"`{dotted}`: torch.utils is not allowed in a solution (its modules start processes, run code from "
                "text, write files or build native code)",
            )
        if parts[0] in REFUSED_PARTS:
            table, why = REFUSED_PARTS[parts[0]]
            refused = [reason for key, reason in table.items() if contains(parts[1:], key.split("."))]
            if refused:
                self.ctx.add(refused[0], node, f"`{dotted}` is not allowed in a solution ({why})")

    def check_value(self, node: ast.AST, dotted: str, obj: Any) -> None:
        """A module may be used only through its attributes; a torch or triton class (library_class) also called, as
        a type (isinstance, annotations, except, a base the ClassDef checks) or as a decorator. Anything else (bound
        to a name, passed, returned, stored) would carry it past every check, under a name the scan does not know."""
        parent = getattr(node, "parent", None)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        if isinstance(parent, ast.Call) and is_getattr(parent) and parent.args[0] is node:
            return
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            return
        if dotted in DIRECT_CALLS and not (isinstance(parent, ast.Call) and parent.func is node):
            self.ctx.add(Reason.STATIC_DYNAMIC, node, f"`{dotted}` used other than called directly: call it by name")
        is_module = isinstance(obj, types.ModuleType) or (isinstance(node, ast.Name) and node.id in self.ctx.modules)
        if is_module:
            self.ctx.add(Reason.STATIC_DYNAMIC, node, f"the module `{dotted}` used as a value: use its attributes")
        elif isinstance(obj, type) and library_class(dotted, obj) and not self.type_position(node, parent):
            self.ctx.add(
                Reason.STATIC_DYNAMIC,
                node,
                f"the class `{dotted}` used as a value: call it, or use it in isinstance or an annotation",
            )

    def type_position(self, node: ast.AST, parent: ast.AST | None) -> bool:
        if node in self.ctx.annotations:
            return True
        if isinstance(parent, ast.Call) and parent.func is node:
            return True
        if isinstance(parent, ast.ClassDef) and node in parent.bases:
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node in parent.decorator_list:
            return True
        if isinstance(parent, ast.ExceptHandler):
            return True
        if isinstance(parent, ast.Subscript) and parent.value is not node:  # a type parameter: Tuple[torch.Tensor]
            return True
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.BitOr):  # a union: torch.Tensor | None
            return True
        if isinstance(parent, ast.Call) and self.ctx.dotted(parent.func) == "typing.cast" and parent.args[:1] == [node]:
            return True
        if isinstance(parent, ast.Tuple):
            return self.type_position(parent, getattr(parent, "parent", None))
        return is_class_argument(node, parent)
