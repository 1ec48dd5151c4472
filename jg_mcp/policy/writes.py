"""What a solution's statements write, for the static policy (jg_mcp.policy.check): assignment, deletion and loop
targets that write into an imported module or an object the solution did not make (Writes), and `os.environ`, which
may only be read (Environ)."""

from __future__ import annotations

import ast

from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.context import Rule
from jg_mcp.policy.tables import OWN
from jg_mcp.policy.trusted import builtin_class


class Environ(Rule):
    """`os.environ`, under any name, only read."""

    def visit_Name(self, node: ast.Name) -> None:
        if self.ctx.aliases.get(node.id) == "os.environ":
            self.check_environ(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if self.ctx.dotted(node) == "os.environ":
            self.check_environ(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if self.ctx.dotted(node.value) == "os.environ" and self.ctx.const_str(node.slice) is None:
            self.ctx.add(Reason.STATIC_IO, node, "reads the environment with a computed name")

    def check_environ(self, node: ast.AST) -> None:
        """`os.environ` (under any name) only read: `.get(NAME)`, `[NAME]` or `NAME in os.environ` (`not in`), each
        with NAME a constant string. Written, deleted, iterated or bound to a name, it configures what reads it later
        in this process (Triton's knobs: TRITON_CACHE_MANAGER imports any module) or hands over every variable."""
        parent = getattr(node, "parent", None)
        if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr == "get":
            return
        if isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.ctx, ast.Load):
            return
        if self.asks_environ(node, parent):
            return
        self.ctx.add(Reason.STATIC_IO, node, "`os.environ` used other than to read one named variable")

    def asks_environ(self, node: ast.AST, parent: ast.AST | None) -> bool:
        """`"NAME" in os.environ` or `not in`: one comparison, a constant string on the left, the environment the
        only comparator (whether one named variable is set, as `.get(NAME) is not None` asks)."""
        return (
            isinstance(parent, ast.Compare)
            and len(parent.ops) == 1
            and isinstance(parent.ops[0], (ast.In, ast.NotIn))
            and parent.comparators == [node]
            and self.ctx.const_str(parent.left) is not None
        )


class Writes(Rule):
    """The targets of statements that bind or write."""

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.check_target(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.check_target(node.target)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.check_target(target)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self.check_target(target)

    def visit_For(self, node: ast.For) -> None:
        self.check_target(node.target)

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self.check_target(node.optional_vars)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.check_target(node.target)

    def made_by_file(self, name: str) -> bool:
        """A name that is, wherever it is read, an object the file made whose attributes are its own data: bound once
        in the whole file, at module level, by an undecorated def (`kernel.configs = {}`: a function's attributes
        are its `__dict__`; a decorated one is what the decorator returned, a JITFunction whose `.fn` or `.cache`
        Triton runs) or by `name = C(...)` with C a plain class of the file's (plain_class). An import, a parameter,
        anything rebound or reached through another object is none."""
        stmt = self.ctx.top_level.get(name)
        if name in self.ctx.aliases or stmt is None:
            return False
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return not stmt.decorator_list
        if not isinstance(stmt, ast.Assign) or not isinstance(call := stmt.value, ast.Call):
            return False
        return isinstance(call.func, ast.Name) and self.plain_class(call.func.id, set())

    def plain_class(self, name: str, seen: set[str]) -> bool:
        """A class the file defines once at module level whose instances hold only its own data: its bases builtin
        classes or other plain classes of the file's (no imported base: an nn.Module's or a library object's
        `__setattr__` is code the file did not write), no keyword (metaclass=), no decorator but `dataclass`."""
        stmt = self.ctx.top_level.get(name)
        if name in seen or name in self.ctx.aliases or not isinstance(stmt, ast.ClassDef) or stmt.keywords:
            return False
        for decorator in stmt.decorator_list:
            spelt = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self.ctx.dotted(spelt) != "dataclasses.dataclass":
                return False
        seen.add(name)
        for base in stmt.bases:
            if not isinstance(base, ast.Name) or base.id in self.ctx.aliases:
                return False
            if not (builtin_class(base.id) and base.id not in self.ctx.bound) and not self.plain_class(base.id, seen):
                return False
        return True

    def check_target(self, target: ast.AST) -> None:
        """An assignment target that writes into an imported module: one of its attributes, or an item of an object
        it holds (`os.environ[...] = ...`), under any nesting of tuples, lists and stars."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.check_target(element)
        elif isinstance(target, ast.Starred):
            self.check_target(target.value)
        elif isinstance(target, ast.Attribute) and (dotted := self.ctx.dotted(target)):
            self.ctx.add(Reason.STATIC_MONKEYPATCH, target, f"assigns `{dotted}` of an imported module")
        elif isinstance(target, ast.Attribute) and not (
            isinstance(target.value, ast.Name) and (target.value.id in OWN or self.made_by_file(target.value.id))
        ):
            what = (
                f"assigns `.{target.attr}` of an object the solution did not make (only self's, cls's and ctx's, a "
                "plain function the file defines, an instance of a plain class it defines, bound once at module level)"
            )
            self.ctx.add(Reason.STATIC_MONKEYPATCH, target, what)
        elif isinstance(target, ast.Subscript) and (dotted := self.ctx.dotted(target.value)):
            self.ctx.add(Reason.STATIC_MONKEYPATCH, target, f"writes an item of `{dotted}` of an imported module")
