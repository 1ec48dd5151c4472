"""No two modules of the package define a class of the same name: a reader who meets `Finding` or `Gate` knows which
one it is without looking at the import. Every module under jg_mcp/ is parsed, never imported."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jg_mcp"


def test_no_two_modules_define_a_class_of_the_same_name() -> None:
    homes: defaultdict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                homes[node.name].append(path.relative_to(PACKAGE).as_posix())
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}
