"""What a solution spells other than by a name, for the static policy (jg_mcp.policy.check): an operator is the
method it calls (`a @ b` is `__matmul__`); a name-like string, constant-folded (`'_scaled' + '_mm'`), may name a
forbidden API or a dunder (`g["__builtins__"]`); and a string in an annotation is code to whatever evaluates
annotations, scanned as the code it is."""

from __future__ import annotations

import ast
from collections.abc import Callable

from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.context import Context, Rule
from jg_mcp.policy.identifiers import NAMES_ALLOWED_AS_DUNDERS, is_dunder
from jg_mcp.policy.source_ast import fold_text
from jg_mcp.policy.tables import MAX_SOURCE_BYTES, OPERATOR_METHODS, OPERATOR_SYMBOLS


class Operators(Rule):
    """A binary operator, or an augmented assignment's, where the method it calls is forbidden."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.forbidden_leaves = frozenset(b.rsplit(".", 1)[-1] for b in ctx.forbidden)
        """The last part of every forbidden name (operators are judged per node: a chain of 100,000 `+`)."""

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self.check_operator(node.op, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.check_operator(node.op, node)

    def check_operator(self, op: ast.operator, node: ast.AST) -> None:
        """An operator is the method it calls, whether a binary operation or an augmented assignment spells it
        (`c @= b` falls back to `__matmul__`): forbidden where that method, its reflected or in-place form is."""
        method = OPERATOR_METHODS.get(type(op))
        if method is None:
            return
        forms = {method, f"__r{method[2:]}", f"__i{method[2:]}"}
        if forms & self.forbidden_leaves:
            self.ctx.add(Reason.STATIC_FORBIDDEN, node, f"uses the forbidden `{OPERATOR_SYMBOLS[type(op)]}` operator")


class Strings(Rule):
    """Constant strings, and constant string expressions folded once at their outermost node (whose parts are then
    not visited)."""

    def visit_BinOp(self, node: ast.BinOp) -> bool:
        if node in self.ctx.lengths and not isinstance(getattr(node, "parent", None), ast.BinOp):
            self.check_fold(node)
        return node not in self.ctx.lengths

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self.check_string(node.value, node)

    def check_fold(self, node: ast.AST) -> None:
        if self.ctx.lengths[node] > MAX_SOURCE_BYTES:
            self.ctx.add(Reason.SYNTAX, node, f"a constant string expression above {MAX_SOURCE_BYTES >> 20} MiB")
        else:
            self.check_string(fold_text(node), node)

    def check_string(self, text: str, node: ast.AST) -> None:
        """Name-like strings (no whitespace) naming a forbidden API; prose (docstrings) is skipped."""
        if not text or any(c.isspace() for c in text):
            return
        if text.isidentifier() and is_dunder(text) and text not in ("__main__", *NAMES_ALLOWED_AS_DUNDERS):
            what = f"string names the dunder `{text}`: reflection is not allowed"
            self.ctx.add(Reason.STATIC_INTROSPECTION, node, what)
        for bad in self.ctx.forbidden:
            leaf = bad.rsplit(".", 1)[-1]
            if text in (bad, leaf) or text.endswith("." + leaf):
                self.ctx.add(Reason.STATIC_FORBIDDEN, node, f"string names forbidden `{bad}`: {text!r}")


class Annotations(Rule):
    """Strings in an annotation are code to whatever evaluates annotations (typing, functools, TorchScript): each one
    that parses as an expression is scanned, by the whole policy, as the code it is."""

    def __init__(self, ctx: Context, scan: Callable[[ast.AST], None]) -> None:
        super().__init__(ctx)
        self.scan = scan
        """The visitor's walk (policy.Visitor.scan), for the code an annotation's string holds."""

    def visit_arg(self, node: ast.arg) -> None:
        self.check_annotation(node.annotation)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.check_annotation(node.returns)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.check_annotation(node.annotation)

    def check_annotation(self, annotation: ast.AST | None) -> None:
        for node in ast.walk(annotation) if annotation is not None else []:
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            try:
                tree = ast.parse(node.value.strip(), mode="eval")
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue  # what does not parse does not evaluate either
            inner = self.ctx.prepare(tree, main=False)
            self.ctx.annotations.update(inner)
            for outer in inner:
                outer.lineno = getattr(node, "lineno", 0)  # type: ignore[attr-defined]
            self.scan(tree.body)
