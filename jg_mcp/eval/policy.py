"""Policy: what a solution's source may use, an allow-list checked in the harness before the candidate runs (the
run-time record of forbidden operators is in jg_mcp.eval.candidate.recorder).

The static pass refuses, each with its line and a sentence the agent can act on:
- importing anything outside the allowed modules (torch, triton, math, ...), or using a member of one outside its
  allow-list (policy_members: functools.update_wrapper, triton.testing), under any name that reaches it;
- reflection and dynamic code: `getattr` with a computed name, `setattr`/`delattr`, dunder attributes
  (`__dict__`, `__class__`, `__globals__`, ...), `exec`/`eval`/`compile`/`__import__`, `globals`/`vars`;
- private or by-name torch access (`torch._C`, `torch.ops`, any `torch._name`), streams, threads and processes,
  files and the environment (except reading one named variable), patching imported modules, tensor subclasses;
- any spelling of a forbidden API: the name, an alias, a constant-folded string, and the method of the same
  name on a tensor (`x.bmm` when `torch.bmm` is forbidden);
- native code: `torch.utils.cpp_extension` (every builder) under any name that reaches it, as a class: a library
  loaded into the candidate's process runs with the interpreter's and torch's full powers (policy_tables.NATIVE_BUILDS);
- a module reached through an allowed one (`torch.sys` is `sys`): every dotted name rooted at an import is resolved
  step by step against the real, trusted modules in the harness (getattr on them; the candidate's code never runs);
- a module or class used as a value (bound to a name, passed, returned, stored): only its attributes, calls, and
  (for a class) type tests, annotations and bases are allowed, so no alias escapes the checks; a class's base must
  be an imported class or a class the file defines;
- torch hooks (`__torch_function__`, `__torch_dispatch__`) defined anywhere, whatever the class's bases, and in a
  class body any dunder method outside its protocol's (policy_tables.CLASS_DUNDERS: no `__setattr__`, descriptors,
  `__new__`), and a class made at run time from names (policy_classes: `type(cls)`, a metaclass, enum's functional
  API);
- frames, code objects and other code's globals reached through public names (`gen.gi_frame.f_back.f_globals`, a
  Triton function's `get_capture_scope()`), and strings that name a dunder (`g["__builtins__"]`);
- what hands over a module the policy refuses (`.numpy()`), maps a file (`.from_file` on any object), computes
  library ops' derivatives (autograd.grad, `.backward()`, torch.func), the rest of torch.utils (DataLoader's worker
  processes, benchmark's code from text), TorchScript, compiled artifacts from bytes (torch.compiler), file exports
  (onnx, the profilers) and Inductor's `options` (the compiler it runs);
- Triton's parts that build, place or load code (policy_tables.TRITON_REFUSED: triton.compile, its C builds, its
  cache, its backends' drivers, its configuration), whose functions are refused as objects under any name;
- syntax outside the allow-list (policy_tables.ALLOWED_SYNTAX): `match` (a class pattern reads attributes by name,
  some named only at run time), coroutines, and any node type the policy does not know, such as a later Python's;
- a file above MAX_SOURCE_BYTES, or too deep to parse (a finding, never an exception);
- a binding of the module's own dunders (`__name__`, `__file__`) anywhere (check_binding).

The body of a module-level `if __name__ == "__main__":` (a self-test) never runs when the eval imports the solution:
its syntax is checked but its names are not judged (main_guard), and the report's notes say so.

The scan is total over the syntax tree: every node is of a type the allow-list names or is refused, and every field
of every node that holds a name rather than nodes (attribute names, pattern attributes and captures, parameter,
keyword, import, global and handler names, type parameters) is checked by the rules of its kind
(policy_tables.NAME_FIELDS); a plain-valued field the tables do not list is refused. It is linear in the source: an
explicit stack, not recursion, and each node's dotted name and constant string computed once, bottom up. The
walk over the syntax is here (what statements write is jg_mcp.eval.policy_writes); what each dotted name reaches
and whether it may be used there (and how the calls whose arguments matter are called) is
jg_mcp.eval.policy_names.

A forbidden name forbids its whole operator family (jg_mcp.eval.ops): `torch.tensordot` is a matrix product
whether or not a goal's list names it.
"""

from __future__ import annotations

import ast
import functools
import types
from dataclasses import dataclass, field

from jg_mcp.eval.ops import family_members, family_names
from jg_mcp.eval.policy_brief import policy_text as policy_text
from jg_mcp.eval.policy_classes import compares_class, defines_member, is_memberless_enum, is_type_call
from jg_mcp.eval.policy_identifiers import NAMES_ALLOWED_AS_DUNDERS, is_dunder, skipped_blocks
from jg_mcp.eval.policy_names import refused_objects
from jg_mcp.eval.policy_scopes import Scopes
from jg_mcp.eval.policy_tables import (
    ALLOWED_MODULES,
    ALLOWED_SYNTAX,
    DIRECT_CALLS,
    DYNAMIC_NAMES,
    ENV_READS,
    IO_NAMES,
    LITERAL,
    MAX_SOURCE_BYTES,
    NAME_FIELDS,
    OPERATOR_METHODS,
    OPERATOR_SYMBOLS,
    REFLECTION_CALLS,
    REFUSED_SYNTAX,
)
from jg_mcp.eval.policy_writes import Writes
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import Finding
from jg_mcp.eval.source_ast import (
    fold_text,
    plain_values,
)
from jg_mcp.eval.trusted import (
    UNKNOWN,
    builtin_class,
    is_tensor_machinery,
)


@dataclass
class _Scan(Writes, ast.NodeVisitor):
    """The walk over a parsed solution: every node's syntax and every name-holding field, by the rules of `Names`
    and `Identifiers`."""

    refused_nodes: set[ast.AST] = field(default_factory=set)
    """Nodes refused as syntax: a part of one (a `case` of a refused `match`) is not refused again."""
    scopes: Scopes = field(default_factory=lambda: Scopes([]))
    """Python's scopes in the file: a builtin's name bound locally (`def f(input)`) is that local there."""

    def scan(self, root: ast.AST) -> None:
        """Check every node's syntax and names, and visit it, parents first, in source order, with an explicit stack
        (code may nest deeper than Python's recursion limit); a visitor returning False keeps its children unvisited
        (their syntax and names are still checked)."""
        stack = [(root, True, True)]
        while stack:
            node, visit, judged = stack.pop()
            judged = judged and node not in self.unjudged
            self.check_syntax(node, judged)
            deeper = judged and visit and self.visit(node) is not False
            stack.extend((child, deeper, judged) for child in reversed(list(ast.iter_child_nodes(node))))

    def check_syntax(self, node: ast.AST, judged: bool = True) -> None:
        """The node's type must be allowed (policy_tables.ALLOWED_SYNTAX), and each value in its fields that is not a
        node must be one the tables know: a name, checked by the rules of its kind (in code that never runs, `judged`
        False, only for a binding of the module's dunders), or a literal."""
        kind = type(node).__name__
        if getattr(ast, kind, None) is not type(node):
            self.refuse_syntax(node, kind)
            return  # no table knows its fields
        if kind not in ALLOWED_SYNTAX:
            self.refuse_syntax(node, kind)
        elif isinstance(node, ast.comprehension) and node.is_async:
            self.refuse_syntax(node, "AsyncFor")
        fields = NAME_FIELDS.get(kind, {})
        for name, value in plain_values(node):
            what = fields.get(name)
            if what is None:
                self.add(
                    Reason.SYNTAX,
                    node,
                    f"`{kind}.{name}` holds a value the policy has no rule for: a solution may use only the syntax "
                    "the policy knows",
                )
            elif what != LITERAL and judged:
                self.check_identifier(what, str(value), node)
            elif what != LITERAL:
                self.check_binding(what, str(value), node)

    def refuse_syntax(self, node: ast.AST, kind: str) -> None:
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
        self.add(reason, node, what)

    def generic_visit(self, node: ast.AST) -> None:
        """Children are visited by `scan`."""

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.check_module(a.name, node)
            self.check_name(a.name, node)
            if a.name.split(".")[0] in self.allowed:
                self.check_reach(a.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.add(Reason.STATIC_IMPORT, node, "relative import: a solution is a single file")
        self.check_module(node.module or "", node)
        for a in node.names:
            full = f"{node.module}.{a.name}"
            if a.name == "*":
                self.add(Reason.STATIC_DYNAMIC, node, f"`from {node.module} import *`: import names explicitly")
                continue
            self.check_name(full, node)
            if (node.module or "").split(".")[0] in self.allowed:
                self.check_reach(full, node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        """A chain rooted at an import (its attribute name is checked with the node's other names, check_syntax)."""
        if dotted := self.dotted(node):
            if dotted == "os.environ":
                self.check_environ(node)
            obj = self.check_reach(dotted, node)
            self.check_value(node, dotted, obj)
            if not isinstance(getattr(node, "parent", None), ast.Attribute):
                self.check_name(dotted, node)

    def visit_Name(self, node: ast.Name) -> None:
        if self.aliases.get(node.id) == "os.environ":
            self.check_environ(node)
        if node.id in self.aliases:
            if not isinstance(getattr(node, "parent", None), ast.Attribute):
                self.check_name(self.aliases[node.id], node)
            if isinstance(node.ctx, ast.Load):
                self.check_value(node, self.aliases[node.id], self.check_reach(self.aliases[node.id], node))
        parent = getattr(node, "parent", None)
        asks_type = isinstance(parent, ast.Call) and is_type_call(parent) and parent.func is node  # x's class
        if asks_type and not self.scopes.is_local(node) and not compares_class(node, self.dotted, self.bound_names):
            what = "`type(x)` used other than to compare classes (`is`, isinstance): `type(cls)` makes classes"
            self.add(Reason.STATIC_DYNAMIC, node, what)
        if node.id in DYNAMIC_NAMES and not asks_type and not self.scopes.is_local(node):
            self.add(Reason.STATIC_DYNAMIC, node, f"`{node.id}`: dynamic code and reflection are not allowed")
        if node.id in REFLECTION_CALLS and not (isinstance(parent, ast.Call) and parent.func is node):
            what = f"`{node.id}` referenced, not called: dynamic access under another name"
            self.add(Reason.STATIC_DYNAMIC, node, what)
        if node.id in IO_NAMES:
            self.add(Reason.STATIC_IO, node, f"`{node.id}`: a solution may not open files")

    def visit_arg(self, node: ast.arg) -> None:
        self.check_annotation(node.annotation)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.check_annotation(node.returns)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.check_annotation(node.annotation)
        self.check_target(node.target)

    def check_annotation(self, annotation: ast.AST | None) -> None:
        """Strings in an annotation are code to whatever evaluates annotations (typing, functools, TorchScript): scan
        each one that parses as an expression as the code it is."""
        for node in ast.walk(annotation) if annotation is not None else []:
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            try:
                tree = ast.parse(node.value.strip(), mode="eval")
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue  # what does not parse does not evaluate either
            inner = self.prepare(tree, main=False)
            self.annotations.update(inner)
            for outer in inner:
                outer.lineno = getattr(node, "lineno", 0)  # type: ignore[attr-defined]
            self.scan(tree.body)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            if len(node.args) < 2 or self.const_str(node.args[1]) is None:
                self.add(Reason.STATIC_DYNAMIC, node, f"`{node.func.id}` with a computed name")
            elif (dotted := self.dotted(node)) is not None:
                self.check_name(dotted, node)
                reached = self.check_reach(dotted, node)
                if node.func.id == "getattr":  # hasattr answers a bool: the name is judged, nothing is bound
                    self.check_value(node, dotted, reached)
            elif (name := self.const_str(node.args[1])) is not None and name.startswith("_"):
                self.add(Reason.STATIC_DYNAMIC, node, f"`getattr` of private or dunder `{name}`")
        dotted = self.dotted(node.func)
        if dotted in ENV_READS and (not node.args or self.const_str(node.args[0]) is None):
            self.add(Reason.STATIC_IO, node, "reads the environment with a computed name")
        if dotted in DIRECT_CALLS:
            self.check_direct_call(node, dotted)

    def check_operator(self, op: ast.operator, node: ast.AST) -> None:
        """An operator is the method it calls, whether a binary operation or an augmented assignment spells it
        (`c @= b` falls back to `__matmul__`): forbidden where that method, its reflected or in-place form is."""
        method = OPERATOR_METHODS.get(type(op))
        if method is None:
            return
        forms = {method, f"__r{method[2:]}", f"__i{method[2:]}"}
        if forms & self.forbidden_leaves:
            self.add(Reason.STATIC_FORBIDDEN, node, f"uses the forbidden `{OPERATOR_SYMBOLS[type(op)]}` operator")

    @functools.cached_property
    def forbidden_leaves(self) -> frozenset[str]:
        """The last part of every forbidden name (operators are judged per node: a chain of 100,000 `+`)."""
        return frozenset(b.rsplit(".", 1)[-1] for b in self.forbidden)

    def visit_BinOp(self, node: ast.BinOp) -> bool:
        self.check_operator(node.op, node)
        if node in self.lengths and not isinstance(getattr(node, "parent", None), ast.BinOp):
            self.check_fold(node)
        return node not in self.lengths

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self.check_string(node.value, node)

    def check_fold(self, node: ast.AST) -> None:
        if self.lengths[node] > MAX_SOURCE_BYTES:
            self.add(Reason.SYNTAX, node, f"a constant string expression above {MAX_SOURCE_BYTES >> 20} MiB")
        else:
            self.check_string(fold_text(node), node)

    def check_string(self, text: str, node: ast.AST) -> None:
        """Name-like strings (no whitespace) naming a forbidden API; prose (docstrings) is skipped."""
        if not text or any(c.isspace() for c in text):
            return
        if text.isidentifier() and is_dunder(text) and text not in ("__main__", *NAMES_ALLOWED_AS_DUNDERS):
            self.add(Reason.STATIC_INTROSPECTION, node, f"string names the dunder `{text}`: reflection is not allowed")
        for bad in self.forbidden:
            leaf = bad.rsplit(".", 1)[-1]
            if text in (bad, leaf) or text.endswith("." + leaf):
                self.add(Reason.STATIC_FORBIDDEN, node, f"string names forbidden `{bad}`: {text!r}")

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.check_operator(node.op, node)
        self.check_target(node.target)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        """A base must be an imported class (of torch's, not a tensor or a mode), a builtin class, or a class this
        file defines once; anything else (a parameter, a computed base, `*bases`) could be torch.Tensor under another
        name."""
        for base in node.bases:
            target = base.value if isinstance(base, ast.Subscript) else base
            if (dotted := self.dotted(target)) is not None:
                obj = self.resolve(dotted)
                if dotted.startswith("torch.") and (not isinstance(obj, type) or is_tensor_machinery(obj)):
                    self.add(Reason.STATIC_SUBCLASS, node, f"class `{node.name}` subclasses `{dotted}`")
                if is_memberless_enum(obj) and not defines_member(node, self.chains):
                    what = f"enum class `{node.name}` lists no member (a constant or enum.auto()): its call could make "
                    self.add(Reason.STATIC_DYNAMIC, node, what + "another enum class from names given at run time")
            elif isinstance(target, ast.Name) and builtin_class(target.id) and target.id not in self.aliases:
                continue
            elif not (isinstance(target, ast.Name) and target.id in self.local_classes):
                what = ast.unparse(base) if len(ast.dump(base)) < 200 else "a computed base"
                self.add(
                    Reason.STATIC_SUBCLASS,
                    node,
                    f"class `{node.name}` has base `{what}`: a base must be an imported class or a class defined once "
                    "in this file",
                )


def static_check(
    source: str, forbidden: list[str], allowed: set[str] | None = None, notes: list[str] | None = None
) -> list[Finding]:
    """Every static finding in a solution's source; a syntax error, a file too large or too deep to read is itself a
    finding: this never raises on any source. `notes`, when given, gets what was not judged (check_tree)."""
    size = len(source.encode(errors="replace"))
    if size > MAX_SOURCE_BYTES:
        what = f"{size / (1 << 20):.1f} MiB, above the {MAX_SOURCE_BYTES >> 20} MiB a solution file may be"
        return [Finding(reason=Reason.SYNTAX, detail=f"line 0: the file is {what}")]
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [Finding(reason=Reason.SYNTAX, detail=f"line {exc.lineno}: {exc.msg}")]
    except (ValueError, RecursionError, MemoryError) as exc:
        return [Finding(reason=Reason.SYNTAX, detail=f"line 0: the file cannot be read ({type(exc).__name__})")]
    return check_tree(tree, forbidden, allowed, notes)


def check_tree(
    tree: ast.AST, forbidden: list[str], allowed: set[str] | None = None, notes: list[str] | None = None
) -> list[Finding]:
    """Every static finding in a parsed solution. The bodies of its `if __name__ == "__main__":` blocks are not judged
    (main_guard), unless the file binds a module dunder somewhere: then they are, as any code. Each block left
    unjudged is named in `notes`, for the report's reader (never a finding)."""
    guards = skipped_blocks(tree)
    skipped: set[ast.AST] = {stmt for guard in guards for stmt in guard.body}
    scans = _scans(tree, forbidden, allowed, skipped)
    if skipped and scans[0].rebinds:
        scans, guards = _scans(tree, forbidden, allowed, set()), []
    if notes is not None:
        notes += [
            f"line {g.lineno}: the body of `if __name__ == '__main__':` (to line {g.body[-1].end_lineno}) was not "
            "judged for forbidden names: the eval imports the solution as `solution`, so it never runs"
            for g in guards
        ]
    seen: set[tuple[Reason, str]] = set()
    unique = []
    for f in (f for scan in scans for f in scan.findings):
        if (f.reason, f.detail) not in seen:
            seen.add((f.reason, f.detail))
            unique.append(f)
    return unique


def _scans(tree: ast.AST, forbidden: list[str], allowed: set[str] | None, unjudged: set[ast.AST]) -> list[_Scan]:
    """One scan, or one per import a name bound by fallback imports may stand for (Bindings.check_import_names): a use
    of the name is refused if it would be under any of them."""
    first = _scan(tree, forbidden, allowed, unjudged, 0)
    return [first, *(_scan(tree, forbidden, allowed, unjudged, v) for v in range(1, first.variants))]


def _scan(tree: ast.AST, forbidden: list[str], allowed: set[str] | None, unjudged: set[ast.AST], variant: int) -> _Scan:
    scan = _Scan(forbidden=family_names(forbidden), allowed=ALLOWED_MODULES | (allowed or set()), variant=variant)
    scan.members = family_members(forbidden)
    scan.refused = refused_objects()
    for bad in scan.forbidden:  # a forbidden API reached under any other name is the same object
        scan.resolve_prefixes(bad)
        obj = scan.resolve(bad)
        if obj is not UNKNOWN and not isinstance(obj, (types.ModuleType, type)) and id(obj) not in scan.refused:
            scan.refused[id(obj)] = (Reason.STATIC_FORBIDDEN, f"the forbidden `{bad}`")
    scan.unjudged = unjudged
    scan.scopes = Scopes(scan.prepare(tree))
    scan.scan(tree)
    return scan
