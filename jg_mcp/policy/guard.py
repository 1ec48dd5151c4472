"""The main guard, for the static policy (jg_mcp.policy.check): the body of a module-level `if __name__ ==
"__main__":` (a self-test) never runs when the eval imports the solution, so its syntax is checked but its names are
not judged; that holds only while nothing in the file binds the module's own dunders, which MainGuard refuses
anywhere (and then the policy judges those bodies too)."""

from __future__ import annotations

import ast

from jg_mcp.eval.reasons import Reason
from jg_mcp.policy.context import Rule
from jg_mcp.policy.tables import DEFINITION, IMPORTED, VARIABLE

MODULE_DUNDERS_READ = ("__name__", "__file__")
"""The module's own dunder variables a solution may read (`if __name__ == "__main__"`), never bind: the other dunder
variables (`__builtins__`, `__spec__`, `__loader__`, `__dict__`, ...) it may neither read nor bind."""


def main_guard(stmt: ast.AST) -> bool:
    """`if __name__ == "__main__":` exactly (either operand order), as a module-level statement: its body never runs
    when the eval imports the solution. The worker imports it by `importlib.util.spec_from_file_location("solution",
    ...)` (jg_mcp.eval.candidate.worker_commands.Worker.load), so the module's `__name__` is "solution"; the file can
    make it nothing else: binding `__name__` anywhere is refused (MainGuard.check_binding), and so is every way to
    reach the module's globals (globals(), vars(), `__dict__`, setattr, sys.modules, frames). The body's syntax is
    still checked (a node type the policy does not know, say a later Python's, could act at compile time on the whole
    module; refusing it costs an honest self-test nothing), its names are not judged (a self-test calls the library
    op it is compared against), and its imports bind nothing the rest of the file is judged by. An `else:` is judged
    as any code."""
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


class MainGuard(Rule):
    """No binding of the module's own dunders, judged on every name a node's fields hold, in code that runs or not."""

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
            self.ctx.rebinds = True
            what = f"binds `{name}`: a module's own dunders may be read, never bound"
            self.ctx.add(Reason.STATIC_INTROSPECTION, node, what)
