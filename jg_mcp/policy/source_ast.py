"""Pure helpers over a solution's syntax tree for the policy (jg_mcp.policy.check): constant strings folded
bottom-up, once (linear in the tree: chains may be thousands deep), the names a node binds or annotates, and the
values its fields hold that are not nodes."""

from __future__ import annotations

import ast


def contains(parts: list[str], key: list[str]) -> bool:
    """`key` appears in `parts` as a contiguous run."""
    return any(parts[i : i + len(key)] == key for i in range(len(parts) - len(key) + 1))


def is_class_argument(node: ast.AST, parent: ast.AST | None) -> bool:
    """`node` is the class argument of its `parent`, a call of isinstance or issubclass."""
    return (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Name)
        and parent.func.id in ("isinstance", "issubclass")
        and len(parent.args) == 2
        and parent.args[1] is node
        and not parent.keywords
    )


def join_parts(node: ast.AST) -> tuple[str, list[ast.expr]] | None:
    """`'sep'.join([a, b])` -> ('sep', [a, b]) for a constant separator; else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and isinstance(node.args[0], (ast.List, ast.Tuple))
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        return node.func.value.value, node.args[0].elts
    return None


def fold_lengths(nodes: list[ast.AST]) -> dict[ast.AST, int]:
    """The length of each constant string expression (a constant, a `+` of them, an f-string of constants, a
    constant-separator `join` of them) among `nodes` (parents before children, as ast.walk gives), computed
    bottom-up once: linear in the tree, and no string is built."""
    length: dict[ast.AST, int] = {}
    for node in reversed(nodes):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            length[node] = len(node.value)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            if node.left in length and node.right in length:
                length[node] = length[node.left] + length[node.right]
        elif isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
            length[node] = sum(len(str(v.value)) for v in node.values if isinstance(v, ast.Constant))
        elif (parts := join_parts(node)) is not None and all(e in length for e in parts[1]):
            length[node] = sum(length[e] for e in parts[1]) + len(parts[0]) * max(len(parts[1]) - 1, 0)
    return length


def fold_text(node: ast.AST) -> str:
    """The value of a constant string expression `fold_lengths` measured (iteratively: chains may be deep)."""
    out: list[str] = []
    stack: list[ast.AST | str] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, ast.Constant):
            out.append(str(item.value))
        elif isinstance(item, ast.BinOp):
            stack += [item.right, item.left]
        elif isinstance(item, ast.JoinedStr):
            out.append("".join(str(v.value) for v in item.values if isinstance(v, ast.Constant)))
        elif (parts := join_parts(item)) is not None:
            sep, elts = parts
            for i, e in enumerate(reversed(elts)):
                stack += [e] if i == 0 else [sep, e]
    return "".join(out)


def bindings(node: ast.AST) -> list[str]:
    """Names a node binds (a class name bound once is a known class)."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return [node.id]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    if isinstance(node, ast.MatchMapping) and node.rest:
        return [node.rest]
    return []


def plain_values(node: ast.AST) -> list[tuple[str, object]]:
    """(field, value) for each value in a node's fields that is not a node or None (a name, a constant, a flag), an
    item of a list field each on its own: what a scan of the nodes alone would never read."""
    found = []
    for name, value in ast.iter_fields(node):
        for item in value if isinstance(value, list) else [value]:
            if item is not None and not isinstance(item, ast.AST):
                found.append((name, item))
    return found


def annotation_nodes(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.arg) and node.annotation is not None:
        return [node.annotation]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
        return [node.returns]
    if isinstance(node, ast.AnnAssign):
        return [node.annotation]
    return []


def is_getattr(node: ast.AST | None) -> bool:
    """`getattr(x, NAME)` or `hasattr(...)`, called directly."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
        and len(node.args) >= 2
    )
