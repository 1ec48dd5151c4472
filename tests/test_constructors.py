"""Constructors do no I/O (issue 40, "typed edges"): an `__init__` holds the parts it is given, and a classmethod
(`open`, `resolve`, `spawn`) or a function makes them: opens, creates or removes files, pipes and sockets, starts
processes, loads a goal or probes a sandbox. A reader can then make an object from parts in a test, and the place
where the I/O happens has a name that says so. Nor does importing a module do any: `jg-mcp --help` imports every
command's module.

Every module under jg_mcp/ is parsed, never imported. A call counts by the name it is made through: the operating
system's calls for files, pipes, sockets and processes, and the package's own functions whose work is I/O."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jg_mcp"

IO_NAMES = {
    "open",
    "pipe",
    "pipe2",
    "socket",
    "socketpair",
    "Popen",
    "mkdir",
    "makedirs",
    "mkdtemp",
    "mkstemp",
    "rmtree",
    "unlink",
    "read_text",
    "read_bytes",
    "write_text",
    "write_bytes",
    "mmap",
    "spawn",
    "load_goal",
    "read_key",
    "private_goal",
    "launcher_libraries",
    "choose_isolation",
}
"""The last part of a called name that does I/O: the operating system's, and the package's own (loading a goal,
reading a key file, copying a goal, asking the loader, probing the candidate's sandbox)."""

IO_CALLS = {"subprocess.run", "subprocess.check_output", "subprocess.call", "choose"}
"""Whole called names that do I/O where the last part alone would be too common: a process run to its end, and
the sandbox probe (`choose`)."""


def _io_calls(code: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(code):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name.rsplit(".", 1)[-1] in IO_NAMES or name in IO_CALLS:
                found.append(f"{name} (line {node.lineno})")
    return found


def _init_io_calls(cls: ast.ClassDef) -> list[str]:
    """The I/O calls of a class's `__init__`, and of the class's own methods it calls through `self`."""
    methods = {item.name: item for item in cls.body if isinstance(item, ast.FunctionDef)}
    init = methods.get("__init__")
    if init is None:
        return []
    called = {
        node.func.attr
        for node in ast.walk(init)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func).startswith("self.")
        and isinstance(node.func, ast.Attribute)
    }
    return _io_calls(init) + [f"{c} in self.{m}" for m in sorted(called & set(methods)) for c in _io_calls(methods[m])]


def test_no_constructor_in_the_package_does_io() -> None:
    doing_io = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for cls in ast.walk(ast.parse(path.read_text())):
            if isinstance(cls, ast.ClassDef) and (calls := _init_io_calls(cls)):
                doing_io[f"{path.relative_to(PACKAGE)}: {cls.name}"] = calls
    assert doing_io == {}


def test_io_in_a_method_the_constructor_calls_counts() -> None:
    cls = ast.parse(
        "class Mapped:\n"
        "    def __init__(self, fd):\n"
        "        self.raw = self._map(fd)\n"
        "    def _map(self, fd):\n"
        "        return mmap.mmap(fd, 1)\n"
    ).body[0]
    assert isinstance(cls, ast.ClassDef) and _init_io_calls(cls) == ["mmap.mmap (line 5) in self._map"]


def _module_level(tree: ast.Module) -> list[ast.AST]:
    """The statements that run when the module is imported: not the bodies of functions and classes' methods, nor
    the `if __name__ == "__main__":` block."""
    run = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(stmt, ast.If) and "__main__" in ast.unparse(stmt.test):
            continue
        if isinstance(stmt, ast.ClassDef):
            run += [s for s in stmt.body if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)]
            continue
        run.append(stmt)
    return run


def test_no_module_does_io_when_imported() -> None:
    doing_io = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if calls := [c for stmt in _module_level(ast.parse(path.read_text())) for c in _io_calls(stmt)]:
            doing_io[str(path.relative_to(PACKAGE))] = calls
    assert doing_io == {}
