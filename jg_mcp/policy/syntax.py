"""The syntax allow-list, for the static policy (jg_mcp.policy.check): every node is of a type the allow-list names
(tables.ALLOWED_SYNTAX) or is refused, with REFUSED_SYNTAX's sentence where the policy knows the syntax
(`match`, coroutines) and as unknown otherwise (what a later Python adds); and every field of every node that holds a
name rather than nodes is handed to the rules of its kind (identifiers, by tables.NAME_FIELDS), a
plain-valued field the tables do not list being refused. The visitor shows every node to this rule, judged or not."""

from __future__ import annotations

import ast

from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.context import Context, Rule
from jg_mcp.policy.identifiers import Identifiers
from jg_mcp.policy.source_ast import plain_values
from jg_mcp.policy.tables import LITERAL, NAME_FIELDS, REFUSED_SYNTAX


class Syntax(Rule):
    """Each node's type, and the names its fields hold."""

    def __init__(self, ctx: Context, allowed: frozenset[str], names: Identifiers) -> None:
        super().__init__(ctx)
        self.allowed = allowed
        """The node types (`ast` class names) a solution may use."""
        self.names = names
        self.refused_nodes: set[ast.AST] = set()
        """Nodes refused as syntax: a part of one (a `case` of a refused `match`) is not refused again."""

    def check(self, node: ast.AST, judged: bool) -> None:
        """The node's type must be allowed, and each value in its fields that is not a node must be one the tables
        know: a name, checked by the rules of its kind (in code that never runs, `judged` False, only for a binding of
        the module's dunders), or a literal."""
        kind = type(node).__name__
        if getattr(ast, kind, None) is not type(node):
            self.refuse(node, kind)
            return  # no table knows its fields
        if kind not in self.allowed:
            self.refuse(node, kind)
        elif isinstance(node, ast.comprehension) and node.is_async:
            self.refuse(node, "AsyncFor")
        fields = NAME_FIELDS.get(kind, {})
        for name, value in plain_values(node):
            what = fields.get(name)
            if what is None:
                self.ctx.add(
                    Reason.SYNTAX,
                    node,
                    f"`{kind}.{name}` holds a value the policy has no rule for: a solution may use only the syntax "
                    "the policy knows",
                )
            elif what != LITERAL:
                self.names.check(what, str(value), node, judged)

    def refuse(self, node: ast.AST, kind: str) -> None:
        self.refused_nodes.add(node)
        if getattr(node, "parent", None) in self.refused_nodes:
            return  # a part of a refused construct: the construct's finding says it
        reason, what = REFUSED_SYNTAX.get(
            kind,
            (
                Reason.SYNTAX,
                f"`{kind}`, syntax the policy does not know: a solution may use only the syntax a kernel needs "
                "(no `match`, no `async`)",
            ),
        )
        self.ctx.add(reason, node, what)
