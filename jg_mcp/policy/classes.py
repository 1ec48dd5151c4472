"""Classes made at run time, for the static policy (jg_mcp.policy.check): a class statement's body is judged (its dunder
methods are an allow-list, tables.CLASS_DUNDERS), but a class factory called at run time takes its attributes,
dunder methods included, from names spelt at run time: `type(int)` is `type` (`type(int)("C", (), {"__setattr__":
f})`), a metaclass reached by name is another `type`, and Python's enum classes make a class from any names through
their functional API (`enum.Enum("E", [(name, f)])`, or a member-less subclass's call). So the result of `type(x)`
may only be compared as a class, no metaclass may be named or given (`metaclass=`), a member-less enum class may only
be derived from or tested against, and a class derived from one must list its members (an enum with members cannot be
extended: its call only looks a member up)."""

from __future__ import annotations

import ast
import enum
from collections.abc import Callable, Container
from typing import Any

from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.context import Context, Rule
from jg_mcp.policy.source_ast import is_class_argument
from jg_mcp.policy.trusted import builtin_class, is_tensor_machinery

IDENTITY = (ast.Is, ast.IsNot)
"""Comparisons that call no method of either operand."""


def is_metaclass(obj: Any) -> bool:
    """A class whose instances are classes: called with a name, bases and a namespace it makes a class."""
    return isinstance(obj, type) and issubclass(obj, type)


def is_memberless_enum(obj: Any) -> bool:
    """An enum class without members (enum.Enum, IntEnum, Flag, ...): its call with names makes a new enum class."""
    return isinstance(obj, type) and issubclass(obj, enum.Enum) and not obj.__members__


def known_class(node: ast.AST, dotted: Callable[[ast.AST], str | None], bound: Container[str]) -> bool:
    """An operand whose `==` is a class's own: another `type(x)`, a name rooted at an import, a builtin class the file
    does not rebind, or a literal tuple, list or set of those (what `type(x) in (int, float)` compares against)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(known_class(e, dotted, bound) for e in node.elts)
    if isinstance(node, ast.Name) and builtin_class(node.id) and node.id not in bound:
        return True
    return dotted(node) is not None or is_type_call(node)


def is_type_call(node: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "type"
        and len(node.args) == 1
        and not node.keywords
    )


def class_test(node: ast.AST) -> ast.AST | None:
    """Where `node`'s value (a class) is only tested: the class argument of isinstance or issubclass (alone or in a
    tuple there), returned as that call; or an operand of a comparison, returned as the Compare. None elsewhere."""
    parent = getattr(node, "parent", None)
    if isinstance(parent, ast.Tuple):
        holder = getattr(parent, "parent", None)
        if isinstance(holder, ast.Call) and holder.args[1:2] == [parent]:
            node, parent = parent, holder
    if isinstance(parent, ast.Compare):
        return parent
    return parent if is_class_argument(node, parent) else None


def defines_member(cls: ast.ClassDef, dotted: dict[ast.AST, str]) -> bool:
    """The class body binds a public name to a constant, a tuple of constants or `enum.auto()`: an enum member (a
    function or a descriptor bound to a name is not one)."""
    for stmt in cls.body:
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        targets = (
            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        )
        public = [t for t in targets if isinstance(t, ast.Name) and not t.id.startswith("_")]
        if value is not None and public and constant(value, dotted):
            return True
    return False


def constant(node: ast.AST, dotted: dict[ast.AST, str]) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, ast.Tuple):
        return all(constant(e, dotted) for e in node.elts)
    return isinstance(node, ast.Call) and not node.args and not node.keywords and dotted.get(node.func) == "enum.auto"


def compares_class(name: ast.AST, dotted: Callable[[ast.AST], str | None], bound: Container[str]) -> bool:
    """The result of the call `type(x)` whose callee is `name` only tested (class_test): by isinstance or issubclass,
    by `is`, or by `==` and `in` against classes whose `__eq__` is a class's own (known_class: a file's own `__eq__`
    would be handed the class); or only named (`type(x).__name__`, `.__qualname__`, read: a string, for an error
    message)."""
    call = getattr(name, "parent", None)
    holder = getattr(call, "parent", None)
    if isinstance(holder, ast.Attribute) and holder.value is call and holder.attr in ("__name__", "__qualname__"):
        return isinstance(holder.ctx, ast.Load)
    test = class_test(call) if call is not None else None
    if not isinstance(test, ast.Compare):
        return test is not None
    others = [n for n in (test.left, *test.comparators) if n is not call]
    return all(isinstance(op, IDENTITY) for op in test.ops) or all(known_class(n, dotted, bound) for n in others)


def asks_type(node: ast.Name) -> bool:
    """The name is the callee of a one-argument `type(x)`: it asks x's class."""
    parent = getattr(node, "parent", None)
    return isinstance(parent, ast.Call) and is_type_call(parent) and parent.func is node


def check_class_factory(ctx: Context, dotted: str, obj: Any, node: ast.AST) -> None:
    """A class that makes classes from names spelt at run time: a metaclass, under any name; a member-less enum class
    other than as a base, an annotation or a class test (its call is the functional API)."""
    parent = getattr(node, "parent", None)
    if is_metaclass(obj):
        what = f"`{dotted}` is a metaclass: called, it makes a class with any attributes, dunder methods included"
        ctx.add(Reason.STATIC_DYNAMIC, node, what)
    elif is_memberless_enum(obj) and not (
        node in ctx.annotations
        or (isinstance(parent, ast.ClassDef) and node in parent.bases)
        or class_test(node) is not None
    ):
        what = (
            f"`{dotted}` used other than as a base class, an annotation or in isinstance: its call makes an enum "
            "class from names given at run time, dunder methods included"
        )
        ctx.add(Reason.STATIC_DYNAMIC, node, what)


class Classes(Rule):
    """The classes a solution makes: a class statement's bases, and `type(x)` only to compare classes (a class
    factory reached by a dotted name is judged with it, check_class_factory; a class body's dunder methods with the
    names a node holds, identifiers)."""

    def visit_Name(self, node: ast.Name) -> None:
        if (
            asks_type(node)
            and not self.ctx.scopes.is_local(node)
            and not compares_class(node, self.ctx.dotted, self.ctx.bound)
        ):
            what = "`type(x)` used other than to compare classes (`is`, isinstance): `type(cls)` makes classes"
            self.ctx.add(Reason.STATIC_DYNAMIC, node, what)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        """A base must be an imported class (of torch's, not a tensor or a mode), a builtin class, or a class this
        file defines once; anything else (a parameter, a computed base, `*bases`) could be torch.Tensor under another
        name."""
        for base in node.bases:
            target = base.value if isinstance(base, ast.Subscript) else base
            if (dotted := self.ctx.dotted(target)) is not None:
                obj = self.ctx.resolve(dotted)
                if dotted.startswith("torch.") and (not isinstance(obj, type) or is_tensor_machinery(obj)):
                    self.ctx.add(Reason.STATIC_SUBCLASS, node, f"class `{node.name}` subclasses `{dotted}`")
                if is_memberless_enum(obj) and not defines_member(node, self.ctx.chains):
                    what = f"enum class `{node.name}` lists no member (a constant or enum.auto()): its call could make "
                    self.ctx.add(Reason.STATIC_DYNAMIC, node, what + "another enum class from names given at run time")
            elif isinstance(target, ast.Name) and builtin_class(target.id) and target.id not in self.ctx.aliases:
                continue
            elif not (isinstance(target, ast.Name) and target.id in self.ctx.local_classes):
                what = ast.unparse(base) if len(ast.dump(base)) < 200 else "a computed base"
                self.ctx.add(
                    Reason.STATIC_SUBCLASS,
                    node,
                    f"class `{node.name}` has base `{what}`: a base must be an imported class or a class defined once "
                    "in this file",
                )
