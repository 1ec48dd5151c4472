"""What a solution's statements write, for the static policy (jg_mcp.eval.policy): assignment, deletion and loop
targets that write into an imported module or an object the solution did not make, and `os.environ`, which may only
be read (policy._Scan inherits these visitors)."""

from __future__ import annotations

import ast

from jg_mcp.eval.policy_identifiers import Identifiers
from jg_mcp.eval.policy_tables import OWN
from jg_mcp.eval.report import Reason


class Writes(Identifiers):
    """The visitors of statements that bind or write, and the environment's reads."""

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if self.dotted(node.value) == "os.environ" and self.const_str(node.slice) is None:
            self.add(Reason.STATIC_IO, node, "reads the environment with a computed name")

    def check_environ(self, node: ast.AST) -> None:
        """`os.environ` (under any name) only read: `.get(NAME)` or `[NAME]`. Written, deleted or bound to a name, it
        configures what reads it later in this process (Triton's knobs: TRITON_CACHE_MANAGER imports any module)."""
        parent = getattr(node, "parent", None)
        if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr == "get":
            return
        if isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.ctx, ast.Load):
            return
        self.add(Reason.STATIC_IO, node, "`os.environ` used other than to read one named variable")

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

    def check_target(self, target: ast.AST) -> None:
        """An assignment target that writes into an imported module: one of its attributes, or an item of an object
        it holds (`os.environ[...] = ...`), under any nesting of tuples, lists and stars."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.check_target(element)
        elif isinstance(target, ast.Starred):
            self.check_target(target.value)
        elif isinstance(target, ast.Attribute) and (dotted := self.dotted(target)):
            self.add(Reason.STATIC_MONKEYPATCH, target, f"assigns `{dotted}` of an imported module")
        elif isinstance(target, ast.Attribute) and not (isinstance(target.value, ast.Name) and target.value.id in OWN):
            what = f"assigns `.{target.attr}` of an object the solution did not make (only self's, cls's and ctx's)"
            self.add(Reason.STATIC_MONKEYPATCH, target, what)
        elif isinstance(target, ast.Subscript) and (dotted := self.dotted(target.value)):
            self.add(Reason.STATIC_MONKEYPATCH, target, f"writes an item of `{dotted}` of an imported module")
