"""Imports, for the static policy (jg_mcp.policy.check): a solution imports only the allowed modules
(tables.ALLOWED_MODULES), by absolute name and explicitly (no `import *`); each imported dotted name is judged
as any dotted name (names); and a name an import binds stands for that import everywhere in the file, so no
other binding of it may hide what it is (fallback imports in one try/except excepted: the policy scans the file once
for each, Context.choose_fallbacks)."""

from __future__ import annotations

import ast

from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.context import FALLBACKS, Context, Rule
from jg_mcp.policy.names import DottedNames
from jg_mcp.policy.tables import CATEGORY


def fallbacks(imports: list[ast.AST]) -> bool:
    """Import statements each in its own branch of one `try` (its body, or one of its `except` handlers), directly."""
    branches: set[tuple[ast.AST | None, ast.AST]] = set()
    for stmt in imports:
        parent = getattr(stmt, "parent", None)
        if isinstance(parent, ast.ExceptHandler) and stmt in parent.body:
            branches.add((getattr(parent, "parent", None), parent))
        elif isinstance(parent, ast.Try) and stmt in parent.body:
            branches.add((parent, parent))
        else:
            return False
    return len(branches) == len(imports) and len({t for t, _ in branches}) == 1


class Imports(Rule):
    """Each import statement, and the names imports bind."""

    def __init__(self, ctx: Context, names: DottedNames) -> None:
        super().__init__(ctx)
        self.names = names
        """The judge of each dotted name an import spells."""

    def begin(self) -> None:
        """A name an import binds is bound by nothing else anywhere in the file (a parameter, an assignment), nor by
        an import of something else but a fallback: the scan reads it as an import everywhere, so `import math as F`
        in one function would hide the module-level `F.softmax` of `import torch.nn.functional as F`, and a local
        `F = x` its methods. Fallback imports (each in a branch of one try/except: the body, a handler) may bind one
        name, at most FALLBACKS of them."""
        for local, found in self.ctx.imports.items():
            targets = sorted({t for t, _ in found})
            if len(targets) > FALLBACKS:
                self.ctx.add(
                    Reason.STATIC_DYNAMIC,
                    found[-1][1],
                    f"`{local}` is imported as {len(targets)} different things: at most {FALLBACKS} fallbacks",
                )
            if (len(targets) > 1 and not fallbacks([n for _, n in found])) or self.ctx.bound.get(local, 0) > len(found):
                what = " and ".join(f"`{t}`" for t in targets)
                self.ctx.add(
                    Reason.STATIC_DYNAMIC,
                    found[-1][1],
                    f"`{local}` is imported as {what} and bound otherwise too: a name an import binds may stand for "
                    "that import only (or for fallback imports, each in a branch of one try/except)",
                )

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.check_module(a.name, node)
            self.names.check_name(a.name, node)
            if a.name.split(".")[0] in self.ctx.allowed:
                self.names.check_reach(a.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.ctx.add(Reason.STATIC_IMPORT, node, "relative import: a solution is a single file")
        self.check_module(node.module or "", node)
        for a in node.names:
            full = f"{node.module}.{a.name}"
            if a.name == "*":
                self.ctx.add(Reason.STATIC_DYNAMIC, node, f"`from {node.module} import *`: import names explicitly")
                continue
            self.names.check_name(full, node)
            if (node.module or "").split(".")[0] in self.ctx.allowed:
                self.names.check_reach(full, node)

    def check_module(self, name: str, node: ast.AST) -> None:
        root = name.split(".")[0]
        if root not in self.ctx.allowed:
            reason = CATEGORY.get(root, Reason.STATIC_IMPORT)
            allowed = ", ".join(sorted(self.ctx.allowed - {"__future__"}))
            self.ctx.add(reason, node, f"imports `{name}`: a solution may import only {allowed}")
