"""Names in a solution's source, for the static policy (jg_mcp.eval.policy): each dotted name rooted at an import
resolved step by step against the real, trusted modules (the candidate's code never runs), and judged by what it
is and what it reaches: a forbidden API or its family, a private or refused torch part, a module outside the
allowed ones, a dynamic builtin or evaluator under any name, a module or class used as a value."""

from __future__ import annotations

import ast
import builtins
import types
from dataclasses import dataclass, field
from typing import Any

from jg_mcp.eval.ops import in_family
from jg_mcp.eval.policy_tables import (
    ALLOWED_MODULES,
    CATEGORY,
    DIRECT_CALLS,
    DYNAMIC_NAMES,
    EVALUATORS,
    IO_MODULES,
    NATIVE_BUILDS,
    REFLECTION_CALLS,
    SUBCLASS_ATTRS,
    TORCH_REFUSED,
    TRITON_CODE_MODULES,
    TRITON_REFUSED,
)
from jg_mcp.eval.report import Finding, Reason
from jg_mcp.eval.source_ast import (
    annotation_nodes,
    bindings,
    contains,
    fold_lengths,
    fold_text,
    is_getattr,
)
from jg_mcp.eval.trusted import (
    UNKNOWN,
    is_torch_machinery,
    step,
    trusted,
)

REFUSED_PARTS = {
    "torch": (
        TORCH_REFUSED,
        "streams, processes, files, by-name operators, code from text or bytes, derivatives and subclass machinery "
        "are refused",
    ),
    "triton": (
        TRITON_REFUSED,
        "Triton's compiler, builds, cache, drivers and configuration place or load code the eval does not judge: "
        "write triton.jit kernels",
    ),
}
"""The refused parts of each library, as a contiguous run of a dotted name's parts after its root, and why."""
NATIVE_REFUSED = (
    "native code is refused (torch.utils.cpp_extension, every builder): a library loaded into the candidate's process "
    "runs with the interpreter's and torch's full powers, beyond anything the eval can check; write the kernel in "
    "Triton (triton.jit)"
)
"""The finding's sentence for a native build (policy_tables.NATIVE_BUILDS), under any name that reaches it."""


def refused_objects() -> dict[int, tuple[Reason, str]]:
    """Objects no dotted name may reach, by id: the dynamic builtins, `open`, the annotation evaluators."""
    found: dict[int, tuple[Reason, str]] = {}
    for name in DYNAMIC_NAMES | REFLECTION_CALLS:
        if hasattr(builtins, name):
            found[id(getattr(builtins, name))] = (Reason.STATIC_DYNAMIC, f"the builtin `{name}`")
    found[id(builtins.open)] = (Reason.STATIC_IO, "the builtin `open`")
    for dotted in EVALUATORS:
        module, _, name = dotted.rpartition(".")
        if (obj := getattr(trusted(module), name, None)) is not None:
            found[id(obj)] = (Reason.STATIC_DYNAMIC, f"`{dotted}`, which evaluates strings as code")
    for module, reason in TRITON_CODE_MODULES.items():
        try:
            found_module = trusted(module)
        except ImportError:  # a Triton without it: nothing of it to reach
            continue
        for name, obj in vars(found_module).items():
            if not name.startswith("_") and callable(obj) and getattr(obj, "__module__", None) == module:
                found[id(obj)] = (reason, f"`{module}.{name}`, which places or loads code the eval does not judge")
    return found


@dataclass
class Names:
    """The name rules of the static policy: what each dotted name rooted at an import reaches (resolved against
    the real, trusted modules), whether a solution may use it there, and the arguments of the calls whose
    arguments matter (torch.compile); the findings, by line. `policy._Scan` walks the syntax tree
    and asks these."""

    forbidden: list[str]
    allowed: set[str]
    findings: list[Finding] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    """Local name -> dotted name it was imported as (from every import in the file, wherever it stands)."""
    modules: set[str] = field(default_factory=set)
    """Local names bound by `import X`: modules whatever they resolve to."""
    members: set[str] = field(default_factory=set)
    """Members of the forbidden operator families: a torch name they relate to by name (ops.in_family) is forbidden."""
    lengths: dict[ast.AST, int] = field(default_factory=dict)
    chains: dict[ast.AST, str] = field(default_factory=dict)
    """Node -> the dotted name it spells, rooted at an import (a Name, an Attribute chain, a constant getattr)."""
    annotations: set[ast.AST] = field(default_factory=set)
    """Nodes inside annotations, where a class is a type, not a value."""
    local_classes: set[str] = field(default_factory=set)
    """Names bound once in the file, by a class statement."""
    resolved: dict[str, Any] = field(default_factory=dict)
    refused: dict[int, tuple[Reason, str]] = field(default_factory=dict)
    unjudged: set[ast.AST] = field(default_factory=set)
    """Statements that never run at import (the body of a module-level `if __name__ == "__main__":`, policy.main_guard):
    their syntax is checked, their names are not judged and their imports bind nothing the rest of the file uses."""

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
            self.local_classes = {c for c in classes if bound.get(c) == 1}
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
        """A name an import binds is bound by nothing else anywhere in the file (a parameter, an assignment, an import
        of something else): the scan reads it as the import everywhere, so `import math as F` in one function would
        hide the module-level `F.softmax` of `import torch.nn.functional as F`, and a local `F = x` its methods."""
        for local, found in imports.items():
            targets = sorted({t for t, _ in found})
            if len(targets) > 1 or bound.get(local, 0) > len(found):
                what = " and ".join(f"`{t}`" for t in targets)
                self.add(
                    Reason.STATIC_DYNAMIC,
                    found[-1][1],
                    f"`{local}` is imported as {what} and bound otherwise too: a name an import binds may stand for "
                    "that import only",
                )

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

    def check_reach(self, dotted: str, node: ast.AST) -> Any:
        """What a dotted name reaches: a module outside the allowed ones (torch.sys is sys), a dynamic builtin or
        an evaluator (under any name), a function or class of a refused module, a torch mode class."""
        self.resolve_prefixes(dotted)
        obj = self.resolve(dotted)
        if obj is UNKNOWN or "." not in dotted:
            return obj
        if isinstance(obj, types.ModuleType):
            home = obj.__name__
        elif isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
            home = str(getattr(obj, "__module__", None))
        else:
            home = ""
        if home == f"torch.{NATIVE_BUILDS}" and not contains(dotted.split("."), NATIVE_BUILDS.split(".")):
            # a builder reached under another name (check_library_parts names the module's own)
            self.add(Reason.STATIC_DYNAMIC, node, f"`{dotted}`: {NATIVE_REFUSED}")
            return obj
        if isinstance(obj, types.ModuleType):
            root = obj.__name__.split(".")[0]
            if root not in self.allowed - {"os", "__future__"}:
                reason = Reason.STATIC_IO if root in IO_MODULES else CATEGORY.get(root, Reason.STATIC_IMPORT)
                self.add(reason, node, f"`{dotted}` is the module `{obj.__name__}`, which a solution may not use")
            return obj
        if id(obj) in self.refused:
            reason, what = self.refused[id(obj)]
            why = "" if reason == Reason.STATIC_FORBIDDEN else ": dynamic code and reflection are not allowed"
            self.add(reason, node, f"`{dotted}` is {what}{why}")
            return obj
        if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
            root = str(getattr(obj, "__module__", None) or "").split(".")[0]
            if root in CATEGORY or root in IO_MODULES:
                reason = Reason.STATIC_IO if root in IO_MODULES else CATEGORY[root]
                self.add(reason, node, f"`{dotted}` comes from the module `{root}`, which a solution may not use")
        if isinstance(obj, type) and is_torch_machinery(obj):
            self.add(Reason.STATIC_SUBCLASS, node, f"tensor subclass or torch mode machinery: `{dotted}`")
        return obj

    def check_module(self, name: str, node: ast.AST) -> None:
        root = name.split(".")[0]
        if root not in self.allowed:
            reason = CATEGORY.get(root, Reason.STATIC_IMPORT)
            allowed = ", ".join(sorted(self.allowed - {"__future__"}))
            self.add(reason, node, f"imports `{name}`: a solution may import only {allowed}")

    def check_name(self, dotted: str, node: ast.AST) -> None:
        """A dotted name rooted at an imported module: forbidden APIs, private and refused torch parts."""
        parts = dotted.split(".")
        for bad in self.forbidden:
            leaf = bad.rsplit(".", 1)[-1]
            if dotted == bad or dotted.startswith(bad + "."):
                self.add(Reason.STATIC_FORBIDDEN, node, f"uses forbidden `{bad}` (as `{dotted}`)")
            elif bad.startswith("torch.") and parts[0] == "torch" and parts[-1] == leaf and len(leaf) > 3:
                self.add(Reason.STATIC_FORBIDDEN, node, f"`{dotted}` has the name of forbidden `{bad}` in torch")
        if parts[0] == "os" and dotted not in ("os", "os.environ", "os.environ.get", "os.getenv"):
            self.add(
                Reason.STATIC_IO,
                node,
                f"`{dotted}`: of `os` a solution may only read one named variable (os.environ.get('NAME'))",
            )
        if parts[0] in ("torch", "triton") and any(p.startswith("_") for p in parts[1:]):
            self.add(Reason.STATIC_DYNAMIC, node, f"private API `{dotted}`: use public torch and triton APIs")
        elif any(p.startswith("_") and not p.endswith("__") for p in parts[1:]):
            self.add(Reason.STATIC_DYNAMIC, node, f"private API `{dotted}`")
        if any(dotted == e or dotted.startswith(e + ".") for e in EVALUATORS):
            self.add(Reason.STATIC_DYNAMIC, node, f"`{dotted}` evaluates annotations (strings in them) as code")
        self.check_library_parts(dotted, parts, node)
        if parts[-1] in SUBCLASS_ATTRS or dotted.startswith("torch.utils._python_dispatch"):
            self.add(Reason.STATIC_SUBCLASS, node, f"tensor subclass or torch mode machinery: `{dotted}`")

    def check_library_parts(self, dotted: str, parts: list[str], node: ast.AST) -> None:
        """The parts of torch and triton a dotted name reaches: a forbidden family's ops and namespace (torch.linalg),
        native builds and the rest of torch.utils, and the refused parts of each (TORCH_REFUSED, TRITON_REFUSED)."""
        if parts[0] == "torch" and len(parts) > 1 and in_family(parts[-1], self.members):
            self.add(Reason.STATIC_FORBIDDEN, node, f"`{dotted}` is a library op of a forbidden operator family")
        elif parts[0] == "torch" and any(
            p in self.members and isinstance(self.resolve(".".join(parts[: i + 1])), types.ModuleType)
            for i, p in enumerate(parts[1:-1], 1)
        ):
            self.add(Reason.STATIC_FORBIDDEN, node, f"`{dotted}` is in the namespace of a forbidden operator family")
        if parts[0] == "torch" and contains(parts[1:], NATIVE_BUILDS.split(".")):
            self.add(Reason.STATIC_DYNAMIC, node, f"`{dotted}`: {NATIVE_REFUSED}")
        elif parts[:2] == ["torch", "utils"] and len(parts) > 2:
            self.add(
                Reason.STATIC_DYNAMIC,
                node,
                f"`{dotted}`: torch.utils is not allowed in a solution (its modules start processes, run code from "
                "text, write files or build native code)",
            )
        if parts[0] in REFUSED_PARTS:
            table, why = REFUSED_PARTS[parts[0]]
            refused = [reason for key, reason in table.items() if contains(parts[1:], key.split("."))]
            if refused:
                self.add(refused[0], node, f"`{dotted}` is not allowed in a solution ({why})")

    def check_direct_call(self, node: ast.Call, dotted: str) -> None:
        """A call whose arguments are checked: spelt out; torch.compile without Inductor's `options`."""
        if any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
            self.add(Reason.STATIC_DYNAMIC, node, f"`{dotted}` with unpacked arguments: spell them out")
        if any(k.arg == "options" for k in node.keywords):
            self.add(Reason.STATIC_DYNAMIC, node, f"`{dotted}` with options, which name the programs it runs")

    def check_value(self, node: ast.AST, dotted: str, obj: Any) -> None:
        """A module may be used only through its attributes; a class also called, as a type (isinstance,
        annotations, except, a base the ClassDef checks) or as a decorator. Anything else (bound to a name, passed,
        returned, stored) would carry it past every check, under a name the scan does not know."""
        parent = getattr(node, "parent", None)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        if isinstance(parent, ast.Call) and is_getattr(parent) and parent.args[0] is node:
            return
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            return
        if dotted in DIRECT_CALLS and not (isinstance(parent, ast.Call) and parent.func is node):
            self.add(Reason.STATIC_DYNAMIC, node, f"`{dotted}` used other than called directly: call it by name")
        is_module = isinstance(obj, types.ModuleType) or (isinstance(node, ast.Name) and node.id in self.modules)
        if is_module:
            self.add(Reason.STATIC_DYNAMIC, node, f"the module `{dotted}` used as a value: use its attributes")
        elif isinstance(obj, type) and not self.type_position(node, parent):
            self.add(
                Reason.STATIC_DYNAMIC,
                node,
                f"the class `{dotted}` used as a value: call it, or use it in isinstance or an annotation",
            )

    def type_position(self, node: ast.AST, parent: ast.AST | None) -> bool:
        if node in self.annotations:
            return True
        if isinstance(parent, ast.Call) and parent.func is node:
            return True
        if isinstance(parent, ast.ClassDef) and node in parent.bases:
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node in parent.decorator_list:
            return True
        if isinstance(parent, ast.ExceptHandler):
            return True
        if isinstance(parent, ast.Subscript) and parent.value is not node:  # a type parameter: Tuple[torch.Tensor]
            return True
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.BitOr):  # a union: torch.Tensor | None
            return True
        if isinstance(parent, ast.Call) and self.dotted(parent.func) == "typing.cast" and parent.args[:1] == [node]:
            return True
        if isinstance(parent, ast.Tuple):
            return self.type_position(parent, getattr(parent, "parent", None))
        return (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id in ("isinstance", "issubclass")
            and len(parent.args) == 2
            and parent.args[1] is node
        )
