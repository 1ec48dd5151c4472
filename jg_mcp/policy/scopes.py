"""Python's scopes in a solution's syntax tree, for the static policy (jg_mcp.policy.check): which function, lambda,
class body or comprehension each node is evaluated in, what each binds, and so whether a name read there is a local
variable rather than the builtin of the same name (`def f(input): return input` reads its parameter, not the builtin
`input`; `def f(type=type)` reads the builtin in its default, which the enclosing scope evaluates)."""

from __future__ import annotations

import ast
from collections import defaultdict

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
SCOPES = (*FUNCTIONS, ast.ClassDef, *COMPREHENSIONS)


def evaluated_inside(scope: ast.AST, child: ast.AST) -> bool:
    """The child of a scope's node is evaluated in that scope: a function's or a class's body, a lambda's body, a
    comprehension's element and its loops (the first loop's iterable is its enclosing scope's, see Scopes); not
    decorators, defaults, annotations, bases or keywords, which the enclosing scope evaluates."""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return child in scope.body
    if isinstance(scope, ast.Lambda):
        return child is scope.body
    return isinstance(scope, COMPREHENSIONS)


class Scopes:
    """Each node's scope and each scope's bindings and declarations, from one pass over the nodes (parents before
    children, each with its `parent`, as Context.prepare makes them): linear in the tree, however deep."""

    def __init__(self, nodes: list[ast.AST]) -> None:
        self.scope_of: dict[ast.AST, ast.AST | None] = {}
        """Node -> the function, lambda, class or comprehension it is evaluated in; None for the module's."""
        self.bound: defaultdict[ast.AST | None, set[str]] = defaultdict(set)
        self.declared: defaultdict[ast.AST | None, set[str]] = defaultdict(set)
        """Names a scope declares global or nonlocal: bound elsewhere, whatever the scope assigns."""
        for node in nodes:
            parent = getattr(node, "parent", None)
            if parent is None:
                self.scope_of[node] = None
            elif isinstance(parent, SCOPES) and evaluated_inside(parent, node):
                self.scope_of[node] = parent
            elif isinstance(parent, ast.comprehension) and node is parent.iter and self.first_loop(parent):
                comp: ast.AST = getattr(parent, "parent")  # noqa: B009 (first_loop found it)
                self.scope_of[node] = self.scope_of.get(comp)
            else:
                self.scope_of[node] = self.scope_of.get(parent)
            self.record(node)

    @staticmethod
    def first_loop(loop: ast.comprehension) -> bool:
        comp = getattr(loop, "parent", None)
        return isinstance(comp, COMPREHENSIONS) and comp.generators[0] is loop

    def record(self, node: ast.AST) -> None:
        """What the node binds or declares, in its scope. A walrus in a comprehension binds in the enclosing
        function's scope (at module level, a global the comprehension may read before it is assigned): not counted."""
        scope = self.scope_of[node]
        parent = getattr(node, "parent", None)
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            walrus = isinstance(parent, ast.NamedExpr) and parent.target is node
            if not (walrus and isinstance(scope, COMPREHENSIONS)):
                self.bound[scope].add(node.id)
        elif isinstance(node, ast.arg) and isinstance(parent, ast.arguments):
            self.bound[getattr(parent, "parent", None)].add(node.arg)  # a parameter: its function's
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.bound[scope].add(node.name)
        elif isinstance(node, ast.alias):
            self.bound[scope].add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self.bound[scope].add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            self.declared[scope].update(node.names)

    def is_local(self, node: ast.Name) -> bool:
        """The name is a local variable where it stands: the innermost function, lambda or comprehension that binds
        it (class bodies skipped, as Python's closures skip them) is reached before any that declares it global or
        nonlocal, and before the module. A class body's own names are looked up in its namespace, then the module's
        and the builtins: never local."""
        scope = self.scope_of.get(node)
        if not isinstance(scope, (*FUNCTIONS, *COMPREHENSIONS)):
            return False
        while scope is not None:
            if not isinstance(scope, ast.ClassDef):
                if node.id in self.declared[scope]:
                    return False
                if node.id in self.bound[scope]:
                    return True
            scope = self.scope_of[scope]
        return False
