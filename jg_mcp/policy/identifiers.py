"""Names a solution's syntax holds, for the static policy (jg_mcp.policy.check): the rules for each kind of name in a
node's fields (tables.NAME_FIELDS) and so reflection by name: dunders, torch hooks, frames and other code's
globals, private attributes of objects the solution did not define, forbidden methods by name, metaclasses and
private parameters of imported APIs. The visitor hands every such name to Identifiers through the syntax rule
(syntax)."""

from __future__ import annotations

import ast
import types

from jg_mcp.eval.ops import in_family
from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.context import Context, Rule
from jg_mcp.policy.guard import MODULE_DUNDERS_READ, MainGuard
from jg_mcp.policy.tables import (
    ATTRIBUTE,
    CLASS_DUNDERS,
    DEFINITION,
    GATEWAY_ATTRS,
    GLOBALS_ATTRS,
    IMPORTED,
    KEYWORD,
    NAMEDTUPLE_API,
    SUBCLASS_ATTRS,
    VARIABLE,
)
from jg_mcp.policy.trusted import interpreter_attributes, is_tensor_method

NAMES_ALLOWED_AS_DUNDERS = (*MODULE_DUNDERS_READ, "__all__")
"""Dunder variables a solution may name; `__all__` (what `import *` takes) it may also bind."""
STRING_DUNDERS = ("__name__", "__qualname__", "__doc__")
"""Dunder attributes a solution may read of any object: a function's or class's name and docstring, strings that
reach no code (error messages, logs, a table keyed by a kernel's name); writing or deleting them stays refused (a
function renamed after a forbidden op). `type(x).__name__` is the one other use of `type(x)` (classes)."""


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def declares_slots(name: str, node: ast.AST) -> bool:
    """`__slots__ = (...)` (or annotated) as a statement of a class body: the class's own attribute layout, bound
    there and nowhere else (its strings are judged as any string: a slot named `__dict__` is refused)."""
    stmt = getattr(node, "parent", None)
    if name != "__slots__" or not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Store):
        return False
    if not isinstance(getattr(stmt, "parent", None), ast.ClassDef):
        return False
    return (isinstance(stmt, ast.Assign) and node in stmt.targets) or (
        isinstance(stmt, ast.AnnAssign) and stmt.target is node
    )


class Identifiers(Rule):
    """The rules for each kind of name a node's fields hold (tables.NAME_FIELDS): attribute names, variables,
    definitions, keywords and imported names; in code that never runs (the main guard's body) only the bindings of
    the module's dunders."""

    def __init__(self, ctx: Context, guard: MainGuard) -> None:
        super().__init__(ctx)
        self.guard = guard
        self.introspective = interpreter_attributes() | GLOBALS_ATTRS
        """Public attribute names that reach frames, code or other code's globals."""

    def check(self, kind: str, name: str, node: ast.AST, judged: bool) -> None:
        """A name one of the node's fields holds, by the rules of its kind; `judged` False (code that never runs at
        import), only for a binding of the module's dunders."""
        if not judged:
            self.guard.check_binding(kind, name, node)
        elif kind == ATTRIBUTE:
            self.check_attribute_name(name, node)
        elif kind == VARIABLE:
            self.check_variable_name(name, node)
        elif kind == DEFINITION:
            self.check_definition_name(name, node)
        elif kind == KEYWORD:
            self.check_keyword_name(name, node)
        elif kind == IMPORTED:
            self.check_imported_name(name, node)

    def check_reflective(self, name: str, node: ast.AST, spelt: str) -> None:
        """The rules for a name read from an object, whatever the object: no dunder, no torch hook, nothing that
        reaches frames, code or other code's globals."""
        if is_dunder(name) and not self.dunder_allowed(name, node):
            self.ctx.add(Reason.STATIC_INTROSPECTION, node, f"dunder attribute {spelt}: reflection is not allowed")
        if name in SUBCLASS_ATTRS:
            self.ctx.add(Reason.STATIC_SUBCLASS, node, f"tensor subclass or torch mode machinery: {spelt}")
        if name in self.introspective:
            what = f"{spelt} reaches frames, code or other code's globals: reflection is not allowed"
            self.ctx.add(Reason.STATIC_INTROSPECTION, node, what)

    def dunder_allowed(self, name: str, node: ast.AST) -> bool:
        """The dunders an honest file reads: `super().__init__` (own_super), a module's `__version__`, a string
        (`triton.__version__`, `from triton import __version__`), and any object's name or docstring (STRING_DUNDERS),
        read only."""
        parent = getattr(node, "parent", None)
        if isinstance(node, ast.Attribute) and name == "__init__":
            return self.own_super(node.value)
        if isinstance(node, ast.Attribute) and name in STRING_DUNDERS:
            return isinstance(node.ctx, ast.Load)
        if isinstance(node, ast.Attribute) and name == "__version__":
            return (module := self.ctx.dotted(node.value)) is not None and self.is_module(module)
        if isinstance(node, ast.alias) and isinstance(parent, ast.ImportFrom) and name == "__version__":
            return not parent.level and self.is_module(parent.module or "")
        return False

    def own_super(self, base: ast.AST) -> bool:
        """`super()` (zero arguments) or `super(C, self)` with C a class this file defines once, `super` bound nowhere
        in the file: a base of the file's own class, whose bases Classes judged; never `super(Imported, x)` (whose
        MRO starts past what the file chose) nor another object than `self`."""
        if not (isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super"):
            return False
        if base.keywords or "super" in self.ctx.bound:
            return False
        if not base.args:
            return True
        cls, obj = base.args if len(base.args) == 2 else (None, None)
        return (
            isinstance(cls, ast.Name)
            and cls.id in self.ctx.local_classes
            and cls.id not in self.ctx.aliases
            and isinstance(obj, ast.Name)
            and obj.id == "self"
        )

    def is_module(self, dotted: str) -> bool:
        return isinstance(self.ctx.resolve(dotted), types.ModuleType)

    def check_attribute_name(self, name: str, node: ast.AST) -> None:
        """`x.name` or a class pattern's `name=`; on an object the scan cannot name (not rooted at an import, whose
        whole chain check_name judges), also a forbidden method's name and any private name but self's and cls's."""
        spelt = f"`.{name}`" if isinstance(node, ast.Attribute) else f"`{name}=` in a class pattern"
        self.check_reflective(name, node, spelt)
        if name in GATEWAY_ATTRS:
            reason, why = GATEWAY_ATTRS[name]
            self.ctx.add(reason, node, f"{spelt} {why}")
        if isinstance(node, ast.Attribute) and self.ctx.dotted(node) is not None:
            return
        bad = next((b for b in self.ctx.forbidden if b.startswith("torch.") and b.rsplit(".", 1)[-1] == name), None)
        if bad is not None:
            self.ctx.add(Reason.STATIC_FORBIDDEN, node, f"reads {spelt}, the method spelling of forbidden `{bad}`")
        elif in_family(name, self.ctx.members) and is_tensor_method(name):
            self.ctx.add(
                Reason.STATIC_FORBIDDEN, node, f"reads {spelt}, a tensor method of a forbidden operator family"
            )
        base = node.value if isinstance(node, ast.Attribute) else None
        own = isinstance(base, ast.Name) and (base.id in ("self", "cls") or self.class_binds(base.id, name))
        if name.startswith("_") and not is_dunder(name) and not own and name not in NAMEDTUPLE_API:
            what = f"private attribute {spelt} of an object the solution did not define"
            self.ctx.add(Reason.STATIC_DYNAMIC, node, what)

    def class_binds(self, cls: str, name: str) -> bool:
        """`C._x` with C a class the file defines once at module level whose body binds `_x` (an assignment, a def):
        the class's own data or method, as `cls._x` in its classmethods (an import's private parts stay refused)."""
        stmt = self.ctx.top_level.get(cls)
        if cls in self.ctx.aliases or not isinstance(stmt, ast.ClassDef):
            return False
        for member in stmt.body:
            if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and member.name == name:
                return True
            targets = member.targets if isinstance(member, ast.Assign) else [getattr(member, "target", None)]
            if isinstance(member, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) and t.id == name for t in targets
            ):
                return True
        return False

    def check_variable_name(self, name: str, node: ast.AST) -> None:
        """A variable read, bound or declared, wherever the name stands (a Name, a parameter, an `as`, a capture)."""
        self.guard.check_binding(VARIABLE, name, node)
        if is_dunder(name) and name not in NAMES_ALLOWED_AS_DUNDERS and not declares_slots(name, node):
            self.ctx.add(Reason.STATIC_INTROSPECTION, node, f"`{name}`: reflection is not allowed")
        if name in SUBCLASS_ATTRS:
            self.ctx.add(Reason.STATIC_SUBCLASS, node, f"names the torch hook `{name}`")

    def check_definition_name(self, name: str, node: ast.AST) -> None:
        """A function or class the file defines: in a class body the dunder methods of its protocol
        (tables.CLASS_DUNDERS: `__init__`, operators, containers), not a finalizer nor a hook into attribute
        access or creation; elsewhere the name is a variable's. Nowhere the module's own dunders (check_binding)."""
        self.guard.check_binding(DEFINITION, name, node)
        in_class = isinstance(getattr(node, "parent", None), ast.ClassDef)
        if name == "__del__":
            what = "defines a finalizer (`__del__`): it runs when the interpreter chooses, outside the timed call"
            self.ctx.add(Reason.STATIC_DYNAMIC, node, what)
        elif name in SUBCLASS_ATTRS:
            self.ctx.add(Reason.STATIC_SUBCLASS, node, f"defines the torch hook `{name}`: tensor subclasses and modes")
        elif in_class and is_dunder(name) and name not in CLASS_DUNDERS:
            what = (
                f"defines `{name}`: a class may define only the dunder methods of its protocol (__init__, __call__, "
                "__repr__, comparisons, __hash__, containers, iterators, __enter__/__exit__, operators), not hooks "
                "into attribute access, copying or the creation of classes and instances"
            )
            self.ctx.add(Reason.STATIC_DYNAMIC, node, what)
        if not in_class and name not in SUBCLASS_ATTRS:
            self.check_variable_name(name, node)

    def check_keyword_name(self, name: str, node: ast.AST) -> None:
        """An argument's name: no dunder or torch hook, and no private parameter of an imported API."""
        if is_dunder(name):
            self.ctx.add(Reason.STATIC_INTROSPECTION, node, f"keyword `{name}=`: reflection is not allowed")
        if name in SUBCLASS_ATTRS:
            self.ctx.add(Reason.STATIC_SUBCLASS, node, f"tensor subclass or torch mode machinery: `{name}=`")
        parent = getattr(node, "parent", None)
        if name == "metaclass" and isinstance(parent, ast.ClassDef):
            what = (
                "`metaclass=`: a metaclass makes the class (and, for enum's, others from names given at run time); "
                "no kernel needs one"
            )
            self.ctx.add(Reason.STATIC_DYNAMIC, node, what)
        if name.startswith("_") and not is_dunder(name) and isinstance(parent, ast.Call):
            if (callee := self.ctx.dotted(parent.func)) is not None:
                self.ctx.add(Reason.STATIC_DYNAMIC, node, f"private parameter `{name}=` of `{callee}`")

    def check_imported_name(self, name: str, node: ast.AST) -> None:
        """`import a.b.c`, `from a.b import c`: each part after the root module is an attribute read by name
        (DottedNames.check_name judges the whole dotted name as well)."""
        self.guard.check_binding(IMPORTED, name, node)
        parent = getattr(node, "parent", None)
        if isinstance(node, ast.alias) and isinstance(parent, ast.ImportFrom):
            parts, spelt = name.split("."), f"`{parent.module}.{name}`"
        else:
            parts, spelt = name.split(".")[1:], f"`{name}`"
        for part in parts:
            if part != "*":
                self.check_reflective(part, node, f"`.{part}` (imports {spelt})")
