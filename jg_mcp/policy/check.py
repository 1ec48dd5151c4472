"""Policy: what a solution's source may use, an allow-list checked in the harness before the candidate runs (the
run-time record of forbidden operators is in jg_mcp.eval.candidate.recorder).

The static pass refuses, each with its line and a sentence the agent can act on:
- importing anything outside the allowed modules (torch, triton, math, ...), or using a member of one outside its
  allow-list (members: functools.update_wrapper, triton.testing), under any name that reaches it;
- reflection and dynamic code: `getattr` with a computed name, `setattr`/`delattr`, dunder attributes
  (`__dict__`, `__class__`, `__globals__`, ...), `exec`/`eval`/`compile`/`__import__`, `globals`/`vars`;
- private or by-name torch access (`torch._C`, `torch.ops`, any `torch._name`), streams, threads and processes,
  files and the environment (except reading one named variable), patching imported modules, tensor subclasses;
- any spelling of a forbidden API: the name, an alias, a constant-folded string, and the method of the same
  name on a tensor (`x.bmm` when `torch.bmm` is forbidden);
- native code: `torch.utils.cpp_extension` (every builder) under any name that reaches it, as a class: a library
  loaded into the candidate's process runs with the interpreter's and torch's full powers (tables.NATIVE_BUILDS);
- a module reached through an allowed one (`torch.sys` is `sys`): every dotted name rooted at an import is resolved
  step by step against the real, trusted modules in the harness (getattr on them; the candidate's code never runs);
- a module or class used as a value (bound to a name, passed, returned, stored): only its attributes, calls, and
  (for a class) type tests, annotations and bases are allowed, so no alias escapes the checks; a class's base must
  be an imported class or a class the file defines;
- torch hooks (`__torch_function__`, `__torch_dispatch__`) defined anywhere, whatever the class's bases, and in a
  class body any dunder method outside its protocol's (tables.CLASS_DUNDERS: no `__setattr__`, descriptors,
  `__new__`), and a class made at run time from names (classes: `type(cls)`, a metaclass, enum's functional
  API);
- frames, code objects and other code's globals reached through public names (`gen.gi_frame.f_back.f_globals`, a
  Triton function's `get_capture_scope()`), and strings that name a dunder (`g["__builtins__"]`);
- what hands over a module the policy refuses (`.numpy()`), maps a file (`.from_file` on any object), computes
  library ops' derivatives (autograd.grad, `.backward()`, torch.func), the rest of torch.utils (DataLoader's worker
  processes, benchmark's code from text), TorchScript, compiled artifacts from bytes (torch.compiler), file exports
  (onnx, the profilers) and Inductor's `options` (the compiler it runs);
- Triton's parts that build, place or load code (tables.TRITON_REFUSED: triton.compile, its C builds, its
  cache, its backends' drivers, its configuration), whose functions are refused as objects under any name;
- syntax outside the allow-list (tables.ALLOWED_SYNTAX): `match` (a class pattern reads attributes by name,
  some named only at run time), coroutines, and any node type the policy does not know, such as a later Python's;
- a file above MAX_SOURCE_BYTES, or too deep to parse (a finding, never an exception);
- a binding of the module's own dunders (`__name__`, `__file__`) anywhere (guard).

The body of a module-level `if __name__ == "__main__":` (a self-test) never runs when the eval imports the solution:
its syntax is checked but its names are not judged (guard.main_guard), and the report's notes say so.

The scan is one walk (Visitor) over the syntax tree, total: every node is of a type the allow-list names or is
refused (syntax), and every field of every node that holds a name rather than nodes (attribute names, pattern
attributes and captures, parameter, keyword, import, global and handler names, type parameters) is checked by the
rules of its kind (identifiers, by tables.NAME_FIELDS); a plain-valued field the tables do not list is
refused. It is linear in the source: an explicit stack, not recursion, and each node's dotted name and constant
string computed once, bottom up, before the walk (context.Context.prepare). The visitor shows each node it
judges to every rule in the order `rules` gives, each rule one concern in one module:
- Environ (writes): `os.environ` only read;
- Imports (imports): what may be imported, and what a name an import binds stands for;
- DottedNames (names): what each dotted name rooted at an import spells and reaches, and how it is used,
  with the members of each allowed module (members);
- Classes (classes): a class statement's bases, `type(x)` and the class factories;
- Builtins and Calls (calls): the dynamic builtins, getattr, open; the calls whose arguments matter;
- Annotations, Operators and Strings (spellings): what is spelt other than by a name;
- Writes (writes): what assignments, deletions and loops write into;
and the main guard (guard) on every binding. The state they share (the file's bindings, dotted names, scopes,
resolved objects and the findings) is the Context the scan owns.

A forbidden name forbids its whole operator family (jg_mcp.eval.ops): `torch.tensordot` is a matrix product
whether or not a goal's list names it.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Callable
from typing import Any

from jg_mcp.eval.ops import family_members, family_names
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import Finding
from jg_mcp.policy.brief import policy_text as policy_text
from jg_mcp.policy.calls import Builtins, Calls
from jg_mcp.policy.classes import Classes
from jg_mcp.policy.context import Context, Rule
from jg_mcp.policy.guard import MainGuard, skipped_blocks
from jg_mcp.policy.identifiers import Identifiers
from jg_mcp.policy.imports import Imports
from jg_mcp.policy.names import DottedNames, refused_objects
from jg_mcp.policy.scopes import Scopes
from jg_mcp.policy.spellings import Annotations, Operators, Strings
from jg_mcp.policy.syntax import Syntax
from jg_mcp.policy.tables import ALLOWED_MODULES, ALLOWED_SYNTAX, MAX_SOURCE_BYTES
from jg_mcp.policy.trusted import UNKNOWN
from jg_mcp.policy.writes import Environ, Writes


def rules(ctx: Context, scan: Callable[[ast.AST], None]) -> list[Rule]:
    """The rules, in the order the visitor shows each node to them: a node's findings come in this order."""
    names = DottedNames(ctx)
    return [
        Environ(ctx),
        Imports(ctx, names),
        names,
        Classes(ctx),
        Builtins(ctx),
        Calls(ctx),
        Annotations(ctx, scan),
        Operators(ctx),
        Strings(ctx),
        Writes(ctx),
    ]


class Visitor:
    """The one walk over a parsed solution: every node to the syntax rule, and every node it judges to each rule that
    has a method for the node's type."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.syntax = Syntax(ctx, ALLOWED_SYNTAX, Identifiers(ctx, MainGuard(ctx)))
        self.rules = rules(ctx, self.scan)
        self.handlers: dict[type, list[Callable[[Any], bool | None]]] = {}
        """Node type -> each rule's `visit_<type>` method, in the rules' order."""

    def run(self, tree: ast.AST) -> None:
        """Each rule's `begin` (what it judges of the prepared context as a whole), then the walk."""
        for rule in self.rules:
            rule.begin()
        self.scan(tree)

    def scan(self, root: ast.AST) -> None:
        """Check every node's syntax and names, and show it to the rules, parents first, in source order, with an
        explicit stack (code may nest deeper than Python's recursion limit); a rule returning False keeps the node's
        children unvisited (their syntax and names are still checked). In the statements of the context's `unjudged`
        only the syntax and the bindings of the module's dunders are checked."""
        stack = [(root, True, True)]
        while stack:
            node, visit, judged = stack.pop()
            judged = judged and node not in self.ctx.unjudged
            self.syntax.check(node, judged)
            deeper = judged and visit and self.visit(node)
            stack.extend((child, deeper, judged) for child in reversed(list(ast.iter_child_nodes(node))))

    def visit(self, node: ast.AST) -> bool:
        """Show the node to each rule that has a method for its type; whether to visit its children."""
        kind = type(node)
        if (handlers := self.handlers.get(kind)) is None:
            found = (getattr(rule, f"visit_{kind.__name__}", None) for rule in self.rules)
            handlers = self.handlers[kind] = [h for h in found if h is not None]
        deeper = True
        for handle in handlers:
            if handle(node) is False:
                deeper = False
        return deeper


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
    (guard.main_guard), unless the file binds a module dunder somewhere: then they are, as any code. Each block
    left unjudged is named in `notes`, for the report's reader (never a finding)."""
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


def _scans(tree: ast.AST, forbidden: list[str], allowed: set[str] | None, unjudged: set[ast.AST]) -> list[Context]:
    """One scan, or one per import a name bound by fallback imports may stand for (Context.choose_fallbacks): a use
    of the name is refused if it would be under any of them."""
    first = _scan(tree, forbidden, allowed, unjudged, 0)
    return [first, *(_scan(tree, forbidden, allowed, unjudged, v) for v in range(1, first.variants))]


def _scan(
    tree: ast.AST, forbidden: list[str], allowed: set[str] | None, unjudged: set[ast.AST], variant: int
) -> Context:
    ctx = Context(
        forbidden=family_names(forbidden),
        allowed=ALLOWED_MODULES | (allowed or set()),
        members=family_members(forbidden),
        refused=refused_objects(),
        unjudged=unjudged,
        variant=variant,
    )
    for bad in ctx.forbidden:  # a forbidden API reached under any other name is the same object
        ctx.resolve_prefixes(bad)
        obj = ctx.resolve(bad)
        if obj is not UNKNOWN and not isinstance(obj, (types.ModuleType, type)) and id(obj) not in ctx.refused:
            ctx.refused[id(obj)] = (Reason.STATIC_FORBIDDEN, f"the forbidden `{bad}`")
    ctx.scopes = Scopes(ctx.prepare(tree))
    Visitor(ctx).run(tree)
    return ctx
