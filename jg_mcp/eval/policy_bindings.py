"""The bindings in a solution's source, for the static policy (jg_mcp.eval.policy): one pass before the scan records
what each import binds (a local name -> the dotted name it stands for), the names bound anywhere, the classes the file
defines, the nodes inside annotations, each node's constant string and the dotted name it spells; and refuses a name
an import binds that is bound otherwise too. What each dotted name reaches is judged by jg_mcp.eval.policy_names."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import Finding
from jg_mcp.eval.source_ast import annotation_nodes, bindings, fold_lengths, fold_text, is_getattr


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


FALLBACKS = 4
"""Most imports one name may stand for (fallbacks in a try/except): the policy scans the file once for each."""


def defined_name(stmt: ast.AST) -> str | None:
    """The one name a statement binds: a def's, a class's, or the target of `name = value`."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return stmt.name
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id
    return None


@dataclass
class Bindings:
    """The file's names as the scan reads them, and the findings, by line."""

    forbidden: list[str]
    allowed: set[str]
    findings: list[Finding] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    """Local name -> dotted name it was imported as (from every import in the file, wherever it stands)."""
    modules: set[str] = field(default_factory=set)
    """Local names bound by `import X`: modules whatever they resolve to."""
    lengths: dict[ast.AST, int] = field(default_factory=dict)
    chains: dict[ast.AST, str] = field(default_factory=dict)
    """Node -> the dotted name it spells, rooted at an import (a Name, an Attribute chain, a constant getattr)."""
    annotations: set[ast.AST] = field(default_factory=set)
    """Nodes inside annotations, where a class is a type, not a value."""
    local_classes: set[str] = field(default_factory=set)
    """Names bound once in the file, by a class statement."""
    unjudged: set[ast.AST] = field(default_factory=set)
    """Statements that never run at import (the body of a module-level `if __name__ == "__main__":`, policy.main_guard):
    their syntax is checked, their names are not judged and their imports bind nothing the rest of the file uses."""
    variant: int = 0
    """Which import a name that several fallback imports bind is read as (check_import_names): the policy scans the
    file once per import, so each use of the name is judged as each of them."""
    variants: int = 1
    """How many imports bind one name at most: the scans the file needs."""
    bound_names: set[str] = field(default_factory=set)
    """Every name the file binds anywhere it runs at import (an assignment, a parameter, an import, a def...)."""
    top_level: dict[str, ast.AST] = field(default_factory=dict)
    """Names bound once in the file, by a module-level def, class or one-name assignment -> that statement (what the
    name is wherever it is read: policy_writes.made_by_file)."""

    def add(self, reason: Reason, node: ast.AST, what: str) -> None:
        """A finding at the node's line, or its nearest ancestor's (a comprehension, a `case` has none)."""
        line: int | None = None
        at: ast.AST | None = node
        while line is None and at is not None:
            line, at = getattr(at, "lineno", None), getattr(at, "parent", None)
        self.findings.append(Finding(reason=reason, detail=f"line {line or 0}: {what}"))

    def prepare(self, tree: ast.AST, main: bool = True) -> list[ast.AST]:
        """One pass over the whole file (`main`) or a parsed annotation string before the scan: imports (a function
        may use a name imported below it), bindings, annotations, then each node's constant string length and dotted
        name, bottom up."""
        nodes = [tree]
        bound: dict[str, int] = {}
        classes: set[str] = set()
        unrun: set[ast.AST] = set()
        imports: dict[str, list[tuple[str, ast.AST]]] = {}
        for node in nodes:  # breadth first, parents before children, as ast.walk
            for child in ast.iter_child_nodes(node):
                child.parent = node  # type: ignore[attr-defined]
                nodes.append(child)
            if node in self.unjudged or getattr(node, "parent", None) in unrun:
                unrun.add(node)  # nothing there binds at import: the rest of the file cannot use it
                continue
            for name in bindings(node):
                bound[name] = bound.get(name, 0) + 1
            if isinstance(node, ast.ClassDef):
                classes.add(node.name)
            for local, target in self.record_import(node):
                imports.setdefault(local, []).append((target, node))
            for ann in annotation_nodes(node):
                self.annotations.update(ast.walk(ann))
        if main:
            self.bound_names = set(bound)
            self.local_classes = {c for c in classes if bound.get(c) == 1}
            self.top_level = {
                defined: stmt
                for stmt in getattr(tree, "body", [])
                if (defined := defined_name(stmt)) is not None and bound.get(defined) == 1 and stmt not in self.unjudged
            }
            self.check_import_names(imports, bound)
        self.lengths.update(fold_lengths(nodes))
        for node in reversed(nodes):
            if isinstance(node, ast.Name) and node.id in self.aliases:
                self.chains[node] = self.aliases[node.id]
            elif isinstance(node, ast.Attribute) and node.value in self.chains:
                self.chains[node] = f"{self.chains[node.value]}.{node.attr}"
            elif isinstance(node, ast.Call) and is_getattr(node) and node.args[0] in self.chains:
                if attr := self.const_str(node.args[1]):
                    self.chains[node] = f"{self.chains[node.args[0]]}.{attr}"
        return nodes

    def record_import(self, node: ast.AST) -> list[tuple[str, str]]:
        """An import's local names (from anywhere in the file: a function may use a name imported below it), each with
        the dotted name it stands for."""
        found = []
        if isinstance(node, ast.Import):
            for a in node.names:
                local = (a.asname or a.name).split(".")[0]
                found.append((local, a.name if a.asname else a.name.split(".")[0]))
                self.modules.add(local)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found = [(a.asname or a.name, f"{node.module}.{a.name}") for a in node.names if a.name != "*"]
        self.aliases.update(found)
        return found

    def check_import_names(self, imports: dict[str, list[tuple[str, ast.AST]]], bound: dict[str, int]) -> None:
        """A name an import binds is bound by nothing else anywhere in the file (a parameter, an assignment), nor by
        an import of something else but a fallback: the scan reads it as an import everywhere, so `import math as F`
        in one function would hide the module-level `F.softmax` of `import torch.nn.functional as F`, and a local
        `F = x` its methods. Fallback imports (each in a branch of one try/except: the body, a handler) may bind one
        name: scan `variant` reads it as the variant-th of them, and the policy runs a scan for each."""
        for local, found in imports.items():
            targets = sorted({t for t, _ in found})
            if len(targets) > 1:
                self.aliases[local] = targets[min(self.variant, len(targets) - 1, FALLBACKS - 1)]
                self.variants = max(self.variants, min(len(targets), FALLBACKS))
            if len(targets) > FALLBACKS:
                self.add(
                    Reason.STATIC_DYNAMIC,
                    found[-1][1],
                    f"`{local}` is imported as {len(targets)} different things: at most {FALLBACKS} fallbacks",
                )
            if (len(targets) > 1 and not fallbacks([n for _, n in found])) or bound.get(local, 0) > len(found):
                what = " and ".join(f"`{t}`" for t in targets)
                self.add(
                    Reason.STATIC_DYNAMIC,
                    found[-1][1],
                    f"`{local}` is imported as {what} and bound otherwise too: a name an import binds may stand for "
                    "that import only (or for fallback imports, each in a branch of one try/except)",
                )

    def const_str(self, node: ast.AST) -> str | None:
        """The value of a constant string expression; else None."""
        return fold_text(node) if node in self.lengths else None

    def dotted(self, node: ast.AST) -> str | None:
        """`t.nn.functional.linear` -> `torch.nn.functional.linear` through the import aliases."""
        return self.chains.get(node)
