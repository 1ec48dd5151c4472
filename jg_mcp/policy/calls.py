"""Builtins and calls whose use the static policy restricts (jg_mcp.policy.check): the dynamic builtins (exec, eval,
setattr, globals, vars, `type` other than as `type(x)`, ...) under their own names, `getattr`/`hasattr` only called
directly with a constant name, no `open`; and the calls whose arguments matter, used only as direct calls with
spelt-out arguments: an environment read names its variable by a constant string, torch.compile takes no `options`
(they name the programs Inductor runs). The same objects reached under another name are judged as dotted names
(names.refused_objects)."""

from __future__ import annotations

import ast

from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.classes import asks_type
from jg_mcp.policy.context import Rule
from jg_mcp.policy.tables import DIRECT_CALLS, DYNAMIC_NAMES, ENV_READS, IO_NAMES, REFLECTION_CALLS


class Builtins(Rule):
    """The builtins a solution may not use, or only called in one way, by their names."""

    def visit_Name(self, node: ast.Name) -> None:
        parent = getattr(node, "parent", None)
        if node.id in DYNAMIC_NAMES and not asks_type(node) and not self.ctx.scopes.is_local(node):
            self.ctx.add(Reason.STATIC_DYNAMIC, node, f"`{node.id}`: dynamic code and reflection are not allowed")
        if node.id in REFLECTION_CALLS and not (isinstance(parent, ast.Call) and parent.func is node):
            what = f"`{node.id}` referenced, not called: dynamic access under another name"
            self.ctx.add(Reason.STATIC_DYNAMIC, node, what)
        if node.id in IO_NAMES:
            self.ctx.add(Reason.STATIC_IO, node, f"`{node.id}`: a solution may not open files")

    def visit_Call(self, node: ast.Call) -> None:
        """`getattr` or `hasattr` with a computed name, or a private one on an object not rooted at an import (a
        constant name on one is a dotted name: names.DottedNames)."""
        if not (isinstance(node.func, ast.Name) and node.func.id in REFLECTION_CALLS):
            return
        if len(node.args) < 2 or self.ctx.const_str(node.args[1]) is None:
            self.ctx.add(Reason.STATIC_DYNAMIC, node, f"`{node.func.id}` with a computed name")
        elif self.ctx.dotted(node) is None and (name := self.ctx.const_str(node.args[1])) is not None:
            if name.startswith("_"):
                self.ctx.add(Reason.STATIC_DYNAMIC, node, f"`getattr` of private or dunder `{name}`")


class Calls(Rule):
    """The calls whose arguments the scan checks (tables.DIRECT_CALLS)."""

    def visit_Call(self, node: ast.Call) -> None:
        dotted = self.ctx.dotted(node.func)
        if dotted in ENV_READS and (not node.args or self.ctx.const_str(node.args[0]) is None):
            self.ctx.add(Reason.STATIC_IO, node, "reads the environment with a computed name")
        if dotted in DIRECT_CALLS:
            self.check_direct_call(node, dotted)

    def check_direct_call(self, node: ast.Call, dotted: str) -> None:
        """A call whose arguments are checked: spelt out; torch.compile without Inductor's `options`."""
        if any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
            self.ctx.add(Reason.STATIC_DYNAMIC, node, f"`{dotted}` with unpacked arguments: spell them out")
        if any(k.arg == "options" for k in node.keywords):
            self.ctx.add(Reason.STATIC_DYNAMIC, node, f"`{dotted}` with options, which name the programs it runs")
