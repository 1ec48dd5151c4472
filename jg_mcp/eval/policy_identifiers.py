"""The static policy's rules for the names a solution's syntax holds (policy_tables.NAME_FIELDS): attribute names,
variables, definitions, keywords and imported names, by their kind; the bindings of the module's own dunders; and
the module-level `if __name__ == "__main__":` blocks whose bodies are not judged for names (policy._Scan walks the
tree and calls these)."""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass, field

from jg_mcp.eval.ops import in_family
from jg_mcp.eval.policy_names import Names
from jg_mcp.eval.policy_tables import (
    ATTRIBUTE,
    CLASS_DUNDERS,
    DEFINITION,
    GATEWAY_ATTRS,
    GLOBALS_ATTRS,
    IMPORTED,
    KEYWORD,
    NAMEDTUPLE_API,
    SUBCLASS_ATTRS,
    VARIABLE,
)
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.trusted import interpreter_attributes, is_tensor_method

MODULE_DUNDERS_READ = ("__name__", "__file__")
"""The module's own dunder variables a solution may read (`if __name__ == "__main__"`), never bind: the other dunder
variables (`__builtins__`, `__spec__`, `__loader__`, `__dict__`, ...) it may neither read nor bind."""
NAMES_ALLOWED_AS_DUNDERS = (*MODULE_DUNDERS_READ, "__all__")
"""Dunder variables a solution may name; `__all__` (what `import *` takes) it may also bind."""
STRING_DUNDERS = ("__name__", "__qualname__", "__doc__")
"""Dunder attributes a solution may read of any object: a function's or class's name and docstring, strings that
reach no code (error messages, logs, a table keyed by a kernel's name); writing or deleting them stays refused (a
function renamed after a forbidden op). `type(x).__name__` is the one other use of `type(x)` (policy_classes)."""


def main_guard(stmt: ast.AST) -> bool:
    """`if __name__ == "__main__":` exactly (either operand order), as a module-level statement: its body never runs
    when the eval imports the solution. The worker imports it by `importlib.util.spec_from_file_location("solution",
    ...)` (jg_mcp.eval.candidate.worker_commands.Worker.load), so the module's `__name__` is "solution"; the file can
    make it nothing else: binding `__name__` anywhere is refused (check_binding), and so is every way to reach the
    module's globals (globals(), vars(), `__dict__`, setattr, sys.modules, frames). The body's syntax is still checked
    (a node type the policy does not know, say a later Python's, could act at compile time on the whole module;
    refusing it costs an honest self-test nothing), its names are not judged (a self-test calls the library op it is
    compared against), and its imports bind nothing the rest of the file is judged by. An `else:` is judged as any
    code."""
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare):
        return False
    test = stmt.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq) or len(test.comparators) != 1:
        return False
    pair = (test.left, test.comparators[0])
    named = [n for n in pair if isinstance(n, ast.Name) and n.id == "__name__" and isinstance(n.ctx, ast.Load)]
    main = [n for n in pair if isinstance(n, ast.Constant) and type(n.value) is str and n.value == "__main__"]
    return len(named) == 1 and len(main) == 1


def skipped_blocks(tree: ast.AST) -> list[ast.If]:
    """The module-level `if __name__ == "__main__":` statements whose bodies the scan does not judge."""
    return [s for s in tree.body if isinstance(s, ast.If) and main_guard(s)] if isinstance(tree, ast.Module) else []


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def declares_slots(name: str, node: ast.AST) -> bool:
    """`__slots__ = (...)` (or annotated) as a statement of a class body: the class's own attribute layout, bound
    there and nowhere else (its strings are judged as any string: a slot named `__dict__` is refused)."""
    stmt = getattr(node, "parent", None)
    if name != "__slots__" or not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Store):
        return False
    if not isinstance(getattr(stmt, "parent", None), ast.ClassDef):
        return False
    return (isinstance(stmt, ast.Assign) and node in stmt.targets) or (
        isinstance(stmt, ast.AnnAssign) and stmt.target is node
    )


@dataclass
class Identifiers(Names):
    """The rules for each kind of name a node's fields hold."""

    introspective: frozenset[str] = field(default_factory=lambda: interpreter_attributes() | GLOBALS_ATTRS)
    """Public attribute names that reach frames, code or other code's globals."""
    rebinds: bool = False
    """The file binds a module dunder (check_binding): its `__main__` blocks are judged too."""

    def check_identifier(self, kind: str, name: str, node: ast.AST) -> None:
        """A name one of the node's fields holds, by the rules of its kind (policy_tables.NAME_FIELDS)."""
        if kind == ATTRIBUTE:
            self.check_attribute_name(name, node)
        elif kind == VARIABLE:
            self.check_variable_name(name, node)
        elif kind == DEFINITION:
            self.check_definition_name(name, node)
        elif kind == KEYWORD:
            self.check_keyword_name(name, node)
        elif kind == IMPORTED:
            self.check_imported_name(name, node)

    def check_binding(self, kind: str, name: str, node: ast.AST) -> None:
        """No binding of the module's own dunders (`__name__`, `__file__`) anywhere: an assignment, augmented or
        annotated, a walrus, a for/with/except/comprehension target, `del`, an import or import-as, global/nonlocal, a
        parameter, a def or class name. `__name__` is never "__main__" at import only while nothing rebinds it
        (main_guard)."""
        if name not in MODULE_DUNDERS_READ:
            return
        read = isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
        imported = kind == IMPORTED and isinstance(node, ast.alias) and node.asname is None
        if (kind == VARIABLE and not read) or kind == DEFINITION or imported:
            self.rebinds = True
            what = f"binds `{name}`: a module's own dunders may be read, never bound"
            self.add(Reason.STATIC_INTROSPECTION, node, what)

    def check_reflective(self, name: str, node: ast.AST, spelt: str) -> None:
        """The rules for a name read from an object, whatever the object: no dunder, no torch hook, nothing that
        reaches frames, code or other code's globals."""
        if is_dunder(name) and not self.dunder_allowed(name, node):
            self.add(Reason.STATIC_INTROSPECTION, node, f"dunder attribute {spelt}: reflection is not allowed")
        if name in SUBCLASS_ATTRS:
            self.add(Reason.STATIC_SUBCLASS, node, f"tensor subclass or torch mode machinery: {spelt}")
        if name in self.introspective:
            what = f"{spelt} reaches frames, code or other code's globals: reflection is not allowed"
            self.add(Reason.STATIC_INTROSPECTION, node, what)

    def dunder_allowed(self, name: str, node: ast.AST) -> bool:
        """The dunders an honest file reads: `super().__init__` (own_super), a module's `__version__`, a string
        (`triton.__version__`, `from triton import __version__`), and any object's name or docstring (STRING_DUNDERS),
        read only."""
        parent = getattr(node, "parent", None)
        if isinstance(node, ast.Attribute) and name == "__init__":
            return self.own_super(node.value)
        if isinstance(node, ast.Attribute) and name in STRING_DUNDERS:
            return isinstance(node.ctx, ast.Load)
        if isinstance(node, ast.Attribute) and name == "__version__":
            return (module := self.dotted(node.value)) is not None and self.is_module(module)
        if isinstance(node, ast.alias) and isinstance(parent, ast.ImportFrom) and name == "__version__":
            return not parent.level and self.is_module(parent.module or "")
        return False

    def own_super(self, base: ast.AST) -> bool:
        """`super()` (zero arguments) or `super(C, self)` with C a class this file defines once, `super` bound nowhere
        in the file: a base of the file's own class, which visit_ClassDef judged; never `super(Imported, x)` (whose
        MRO starts past what the file chose) nor another object than `self`."""
        if not (isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super"):
            return False
        if base.keywords or "super" in self.bound_names:
            return False
        if not base.args:
            return True
        cls, obj = base.args if len(base.args) == 2 else (None, None)
        return (
            isinstance(cls, ast.Name)
            and cls.id in self.local_classes
            and cls.id not in self.aliases
            and isinstance(obj, ast.Name)
            and obj.id == "self"
        )

    def is_module(self, dotted: str) -> bool:
        return isinstance(self.resolve(dotted), types.ModuleType)

    def check_attribute_name(self, name: str, node: ast.AST) -> None:
        """`x.name` or a class pattern's `name=`; on an object the scan cannot name (not rooted at an import, whose
        whole chain check_name judges), also a forbidden method's name and any private name but self's and cls's."""
        spelt = f"`.{name}`" if isinstance(node, ast.Attribute) else f"`{name}=` in a class pattern"
        self.check_reflective(name, node, spelt)
        if name in GATEWAY_ATTRS:
            reason, why = GATEWAY_ATTRS[name]
            self.add(reason, node, f"{spelt} {why}")
        if isinstance(node, ast.Attribute) and self.dotted(node) is not None:
            return
        bad = next((b for b in self.forbidden if b.startswith("torch.") and b.rsplit(".", 1)[-1] == name), None)
        if bad is not None:
            self.add(Reason.STATIC_FORBIDDEN, node, f"reads {spelt}, the method spelling of forbidden `{bad}`")
        elif in_family(name, self.members) and is_tensor_method(name):
            self.add(Reason.STATIC_FORBIDDEN, node, f"reads {spelt}, a tensor method of a forbidden operator family")
        base = node.value if isinstance(node, ast.Attribute) else None
        own = isinstance(base, ast.Name) and (base.id in ("self", "cls") or self.class_binds(base.id, name))
        if name.startswith("_") and not is_dunder(name) and not own and name not in NAMEDTUPLE_API:
            what = f"private attribute {spelt} of an object the solution did not define"
            self.add(Reason.STATIC_DYNAMIC, node, what)

    def class_binds(self, cls: str, name: str) -> bool:
        """`C._x` with C a class the file defines once at module level whose body binds `_x` (an assignment, a def):
        the class's own data or method, as `cls._x` in its classmethods (an import's private parts stay refused)."""
        stmt = self.top_level.get(cls)
        if cls in self.aliases or not isinstance(stmt, ast.ClassDef):
            return False
        for member in stmt.body:
            if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and member.name == name:
                return True
            targets = member.targets if isinstance(member, ast.Assign) else [getattr(member, "target", None)]
            if isinstance(member, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) and t.id == name for t in targets
            ):
                return True
        return False

    def check_variable_name(self, name: str, node: ast.AST) -> None:
        """A variable read, bound or declared, wherever the name stands (a Name, a parameter, an `as`, a capture)."""
        self.check_binding(VARIABLE, name, node)
        if is_dunder(name) and name not in NAMES_ALLOWED_AS_DUNDERS and not declares_slots(name, node):
            self.add(Reason.STATIC_INTROSPECTION, node, f"`{name}`: reflection is not allowed")
        if name in SUBCLASS_ATTRS:
            self.add(Reason.STATIC_SUBCLASS, node, f"names the torch hook `{name}`")

    def check_definition_name(self, name: str, node: ast.AST) -> None:
        """A function or class the file defines: in a class body the dunder methods of its protocol
        (policy_tables.CLASS_DUNDERS: `__init__`, operators, containers), not a finalizer nor a hook into attribute
        access or creation; elsewhere the name is a variable's. Nowhere the module's own dunders (check_binding)."""
        self.check_binding(DEFINITION, name, node)
        in_class = isinstance(getattr(node, "parent", None), ast.ClassDef)
        if name == "__del__":
            what = "defines a finalizer (`__del__`): it runs when the interpreter chooses, outside the timed call"
            self.add(Reason.STATIC_DYNAMIC, node, what)
        elif name in SUBCLASS_ATTRS:
            self.add(Reason.STATIC_SUBCLASS, node, f"defines the torch hook `{name}`: tensor subclasses and modes")
        elif in_class and is_dunder(name) and name not in CLASS_DUNDERS:
            what = (
                f"defines `{name}`: a class may define only the dunder methods of its protocol (__init__, __call__, "
                "__repr__, comparisons, __hash__, containers, iterators, __enter__/__exit__, operators), not hooks "
                "into attribute access, copying or the creation of classes and instances"
            )
            self.add(Reason.STATIC_DYNAMIC, node, what)
        if not in_class and name not in SUBCLASS_ATTRS:
            self.check_variable_name(name, node)

    def check_keyword_name(self, name: str, node: ast.AST) -> None:
        """An argument's name: no dunder or torch hook, and no private parameter of an imported API."""
        if is_dunder(name):
            self.add(Reason.STATIC_INTROSPECTION, node, f"keyword `{name}=`: reflection is not allowed")
        if name in SUBCLASS_ATTRS:
            self.add(Reason.STATIC_SUBCLASS, node, f"tensor subclass or torch mode machinery: `{name}=`")
        parent = getattr(node, "parent", None)
        if name == "metaclass" and isinstance(parent, ast.ClassDef):
            what = (
                "`metaclass=`: a metaclass makes the class (and, for enum's, others from names given at run time); "
                "no kernel needs one"
            )
            self.add(Reason.STATIC_DYNAMIC, node, what)
        if name.startswith("_") and not is_dunder(name) and isinstance(parent, ast.Call):
            if (callee := self.dotted(parent.func)) is not None:
                self.add(Reason.STATIC_DYNAMIC, node, f"private parameter `{name}=` of `{callee}`")

    def check_imported_name(self, name: str, node: ast.AST) -> None:
        """`import a.b.c`, `from a.b import c`: each part after the root module is an attribute read by name
        (check_name judges the whole dotted name as well)."""
        self.check_binding(IMPORTED, name, node)
        parent = getattr(node, "parent", None)
        if isinstance(node, ast.alias) and isinstance(parent, ast.ImportFrom):
            parts, spelt = name.split("."), f"`{parent.module}.{name}`"
        else:
            parts, spelt = name.split(".")[1:], f"`{name}`"
        for part in parts:
            if part != "*":
                self.check_reflective(part, node, f"`.{part}` (imports {spelt})")
