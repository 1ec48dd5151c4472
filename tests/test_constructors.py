"""Constructors do no I/O (issue 40, "typed edges"): an `__init__` holds the parts it is given, and a classmethod
(`open`, `resolve`, `spawn`) or a function makes them: opens, creates or removes files, pipes and sockets, starts
processes, loads a goal or probes a sandbox. A reader can then make an object from parts in a test, and the place
where the I/O happens has a name that says so.

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


def _io_calls(function: ast.FunctionDef) -> list[str]:
    found = []
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name.rsplit(".", 1)[-1] in IO_NAMES or name in IO_CALLS:
                found.append(f"{name} (line {node.lineno})")
    return found


def test_no_constructor_in_the_package_does_io() -> None:
    doing_io = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for cls in ast.walk(ast.parse(path.read_text())):
            if not isinstance(cls, ast.ClassDef):
                continue
            for item in cls.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__" and (calls := _io_calls(item)):
                    doing_io[f"{path.relative_to(PACKAGE)}: {cls.name}"] = calls
    assert doing_io == {}
