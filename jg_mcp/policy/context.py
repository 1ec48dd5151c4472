"""What the static policy's rules share (jg_mcp.policy.check): the Context one scan owns and hands to each rule, and
the Rule every one of them is.

One pass before the walk (Context.prepare) records what each import binds (a local name -> the dotted name it
stands for), the names bound anywhere, the classes the file defines, the nodes inside annotations, each node's
constant string and the dotted name it spells; the context also resolves dotted names against the real, trusted
modules (once each), knows Python's scopes (scopes) and collects the findings, by line. Rules read it and add
findings to it; no rule keeps state that another reads.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import Finding
from jg_mcp.policy.scopes import Scopes
from jg_mcp.policy.source_ast import annotation_nodes, bindings, fold_lengths, fold_text, is_getattr
from jg_mcp.policy.tables import ALLOWED_MODULES
from jg_mcp.policy.trusted import UNKNOWN, step, trusted

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
class Context:
    """One scan's view of the file: its names as the rules read them, what dotted names reach, and the findings."""

    forbidden: list[str]
    """The forbidden APIs, widened to their operator families (ops.family_names)."""
    allowed: set[str]
    """The modules a solution may import."""
    members: set[str] = field(default_factory=set)
    """Members of the forbidden operator families: a torch name they relate to by name (ops.in_family) is forbidden."""
    refused: dict[int, tuple[Reason, str]] = field(default_factory=dict)
    """Objects no dotted name may reach, by id, with the reason and what each is (names.refused_objects)."""
    unjudged: set[ast.AST] = field(default_factory=set)
    """Statements that never run at import (the body of a module-level `if __name__ == "__main__":`,
    guard.main_guard): their syntax is checked, their names are not judged and their imports bind nothing the
    rest of the file uses."""
    variant: int = 0
    """Which import a name that several fallback imports bind is read as: the policy scans the file once per import,
    so each use of the name is judged as each of them."""
    findings: list[Finding] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    """Local name -> dotted name it was imported as (from every import in the file, wherever it stands)."""
    modules: set[str] = field(default_factory=set)
    """Local names bound by `import X`: modules whatever they resolve to."""
    imports: dict[str, list[tuple[str, ast.AST]]] = field(default_factory=dict)
    """Local name -> each import that binds it: the dotted name it stands for there, and the statement."""
    lengths: dict[ast.AST, int] = field(default_factory=dict)
    """Node -> the length of the constant string expression it is (source_ast.fold_lengths)."""
    chains: dict[ast.AST, str] = field(default_factory=dict)
    """Node -> the dotted name it spells, rooted at an import (a Name, an Attribute chain, a constant getattr)."""
    annotations: set[ast.AST] = field(default_factory=set)
    """Nodes inside annotations, where a class is a type, not a value."""
    local_classes: set[str] = field(default_factory=set)
    """Names bound once in the file, by a class statement."""
    variants: int = 1
    """How many imports bind one name at most: the scans the file needs."""
    bound: dict[str, int] = field(default_factory=dict)
    """Every name the file binds anywhere it runs at import (an assignment, a parameter, an import, a def...), with
    how many times."""
    top_level: dict[str, ast.AST] = field(default_factory=dict)
    """Names bound once in the file, by a module-level def, class or one-name assignment -> that statement (what the
    name is wherever it is read: writes.Writes.made_by_file)."""
    resolved: dict[str, Any] = field(default_factory=dict)
    scopes: Scopes = field(default_factory=lambda: Scopes([]))
    """Python's scopes in the file: a builtin's name bound locally (`def f(input)`) is that local there."""
    rebinds: bool = False
    """The file binds a module dunder (guard.MainGuard): its `__main__` blocks are judged too."""

    def add(self, reason: Reason, node: ast.AST, what: str) -> None:
        """A finding at the node's line, or its nearest ancestor's (a comprehension, a `case` has none)."""
        line: int | None = None
        at: ast.AST | None = node
        while line is None and at is not None:
            line, at = getattr(at, "lineno", None), getattr(at, "parent", None)
        self.findings.append(Finding(reason=reason, detail=f"line {line or 0}: {what}"))

    def prepare(self, tree: ast.AST, main: bool = True) -> list[ast.AST]:
        """One pass over the whole file (`main`) or a parsed annotation string before the walk: imports (a function
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
            self.bound = bound
            self.local_classes = {c for c in classes if bound.get(c) == 1}
            self.top_level = {
                defined: stmt
                for stmt in getattr(tree, "body", [])
                if (defined := defined_name(stmt)) is not None and bound.get(defined) == 1 and stmt not in self.unjudged
            }
            self.imports = imports
            self.choose_fallbacks()
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

    def choose_fallbacks(self) -> None:
        """A name several imports bind (fallbacks, each in a branch of one try/except) is read as the variant-th of
        them in this scan, and the policy runs a scan for each (imports.Imports.begin refuses what is not a
        fallback)."""
        for local, found in self.imports.items():
            targets = sorted({t for t, _ in found})
            if len(targets) > 1:
                self.aliases[local] = targets[min(self.variant, len(targets) - 1, FALLBACKS - 1)]
                self.variants = max(self.variants, min(len(targets), FALLBACKS))

    def const_str(self, node: ast.AST) -> str | None:
        """The value of a constant string expression; else None."""
        return fold_text(node) if node in self.lengths else None

    def dotted(self, node: ast.AST) -> str | None:
        """`t.nn.functional.linear` -> `torch.nn.functional.linear` through the import aliases."""
        return self.chains.get(node)

    def resolve(self, dotted: str) -> Any:
        """The real object a dotted name rooted at an allowed module reaches, step by step; UNKNOWN when a step
        does not resolve, is private, or the root is not a trusted module."""
        if dotted in self.resolved:
            return self.resolved[dotted]
        head, _, part = dotted.rpartition(".")
        if not head:
            obj = trusted(dotted) if dotted in ALLOWED_MODULES - {"__future__"} else UNKNOWN
        else:
            base = self.resolve(head)
            obj = UNKNOWN if base is UNKNOWN or part.startswith("_") else step(base, part)
        self.resolved[dotted] = obj
        return obj

    def resolve_prefixes(self, dotted: str) -> None:
        """Fill the resolution cache shortest prefix first (no recursion as deep as the chain is long)."""
        parts = dotted.split(".")
        for i in range(1, len(parts) + 1):
            self.resolve(".".join(parts[:i]))


class Rule:
    """One concern of the policy. The visitor (policy.Visitor) shows each node it judges to every rule's
    `visit_<NodeType>` method, if it has one, in the order of the policy's rule list; a method returning False keeps
    the node's children unvisited (their syntax and names are still checked). `begin` runs once, after the context
    is prepared and before the walk."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def begin(self) -> None:
        """Nothing to judge before the walk, unless the rule says otherwise."""
