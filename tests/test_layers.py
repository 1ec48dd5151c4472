"""The package's layers (AGENTS.md, "Layers"): no module imports from a layer above its own, and no imports form a
circle.

Every module under jg_mcp/ is parsed, never imported. An import counts wherever it runs: at the top of a module or
inside a function (a lazy import runs up as surely as one at the top). An import under `if TYPE_CHECKING:` never
runs, so it counts for neither check. A package's `__init__` is a module of its own; importing `a.b.c` is an edge to
`a.b.c` alone, though Python runs `a.b`'s `__init__` first: until the packages are cut by layer, a file placed below
its package's layer (eval/ops.py, in the policy layer) would otherwise always run back up through that `__init__`.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

PACKAGE = Path(__file__).resolve().parent.parent / "jg_mcp"

RANKS = {
    "core": 0,
    "host": 1,
    "policy": 2,
    "record": 3,
    "live": 4,
    "eval": 4,
    "review": 5,
    "campaign": 6,
    "commands": 7,
}
"""Each layer's height; live and eval stand side by side, and neither imports the other."""

PLACES = {
    "__init__": "core",
    "errors": "core",
    "log": "core",
    "gpu": "core",
    "goals": "core",
    "models": "core",
    "schema_errors": "core",
    "terminal": "core",
    "demo_goal/": "core",
    "eval/reasons": "core",
    "eval/report": "core",
    "eval/report_timing": "core",
    "eval/options": "core",
    "live/bwrap": "host",
    "live/environment": "host",
    "live/lifeline": "host",
    "live/oom": "host",
    "live/output": "host",
    "live/places": "host",
    "live/protections": "host",
    "live/reaper": "host",
    "live/runner": "host",
    "live/groups": "host",
    "live/safefs": "host",
    "live/sandbox": "host",
    "live/sandbox_probe": "host",
    "live/seal": "host",
    "live/seccomp": "host",
    "live/uids": "host",
    "live/walk": "host",
    "live/workspace": "host",
    "live/workspace_fs": "host",
    "live/workspace_scan": "host",
    "goal_text": "policy",
    "eval/ops": "policy",
    "policy/": "policy",
    "record/": "record",
    "live/": "live",
    "eval/": "eval",
    "eval/candidate/": "eval",
    "eval/wire/": "eval",
    "eval/native/": "eval",
    "eval/processes/": "eval",
    "validate": "eval",
    "validate_harness": "eval",
    "validate_report": "eval",
    "validate_solution": "eval",
    "record/replay": "review",
    "record/audit": "review",
    "record/audit_policy": "review",
    "record/audit_report": "review",
    "record/report_html": "review",
    "campaign/": "campaign",
    "scripted": "campaign",
    "commands/": "commands",
    "cli": "commands",
    "__main__": "commands",
    "eval/__main__": "commands",
}
"""Where each module stands, by its path under jg_mcp/ without `.py`: a name ending in "/" places a whole package,
its `__init__` included; any other name one module, which wins over its package. AGENTS.md states the same table;
a module named by neither fails the test until it is placed."""


class Edge(NamedTuple):
    """One import statement's target, as a module of the package."""

    importer: str
    imported: str
    line: int


def place(module: str) -> str:
    """`jg_mcp.live.sandbox` -> `live/sandbox`; the package itself, `jg_mcp`, -> `__init__`."""
    parts = module.split(".")[1:]
    return "/".join(parts) if parts else "__init__"


def layer_of(module: str, places: dict[str, str]) -> str | None:
    name = place(module)
    if name in places:
        return places[name]
    packages = [p for p in places if p.endswith("/") and f"{name}/".startswith(p)]
    return places[max(packages, key=len)] if packages else None


def modules(root: Path) -> dict[str, Path]:
    """Every module under `root`, by dotted name (a package by its own name, for its `__init__.py`)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(node: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """The import statements under `node` that can run: all of them, less the bodies of `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            found.append(child)
        elif isinstance(child, ast.If) and _type_checking(child):
            for other in child.orelse:
                found += _runtime_imports(ast.Module(body=[other], type_ignores=[]))
        else:
            found += _runtime_imports(child)
    return found


def _target(name: str, known: dict[str, Path]) -> str | None:
    """The module an imported dotted name runs: itself, or the nearest package or module it names a member of."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def edges(known: dict[str, Path]) -> list[Edge]:
    """Every runtime import between two modules of `known`, one edge per imported module per statement."""
    found = []
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
            for target in {t for t in (_target(n, known) for n in names) if t is not None and t != module}:
                found.append(Edge(module, target, node.lineno))
    return found


def runs_back_up(found: list[Edge], places: dict[str, str]) -> list[str]:
    """Each import from a module into a higher layer, or sideways into another layer of the same height."""
    wrong = []
    for edge in found:
        low, high = layer_of(edge.importer, places), layer_of(edge.imported, places)
        assert low is not None and high is not None
        if RANKS[high] > RANKS[low] or (RANKS[high] == RANKS[low] and high != low):
            wrong.append(f"{edge.importer} ({low}) imports {edge.imported} ({high}) at line {edge.line}")
    return wrong


CANDIDATE_SIDE = ("eval/candidate/", "eval/wire/")
"""What runs inside the candidate's process (eval/candidate/) and the wire both sides share (eval/wire/): of the eval
they import only each other, never the judge's side (harness, timing, checks, ...), whose code would then run where
the candidate's can reach it."""


def reaches_the_judge(found: list[Edge], places: dict[str, str]) -> list[str]:
    """Each import from the candidate's side into the eval outside it (a lower layer is fine)."""
    wrong = []
    for edge in found:
        if not f"{place(edge.importer)}/".startswith(CANDIDATE_SIDE):
            continue
        layer = layer_of(edge.imported, places)
        assert layer is not None
        if RANKS[layer] >= RANKS["eval"] and not f"{place(edge.imported)}/".startswith(CANDIDATE_SIDE):
            wrong.append(f"{edge.importer} imports {edge.imported} at line {edge.line}")
    return wrong


def a_circle(found: list[Edge]) -> list[str] | None:
    """One circle of imports as the path that closes it (its first module again at the end), or None."""
    after: dict[str, list[str]] = {}
    for edge in found:
        after.setdefault(edge.importer, []).append(edge.imported)
    done: set[str] = set()
    for start in sorted(after):
        if start in done:
            continue
        path, nexts = [start], [iter(sorted(after.get(start, [])))]
        while path:
            step = next(nexts[-1], None)
            if step is None:
                done.add(path.pop())
                nexts.pop()
            elif step in path:
                return [*path[path.index(step) :], step]
            elif step not in done:
                path.append(step)
                nexts.append(iter(sorted(after.get(step, []))))
    return None


def test_every_module_has_a_layer():
    unplaced = [m for m in modules(PACKAGE) if layer_of(m, PLACES) is None]
    assert not unplaced, "place these in PLACES here and in AGENTS.md's table:\n" + "\n".join(unplaced)
    assert set(PLACES.values()) <= set(RANKS)


def test_no_import_runs_back_up():
    wrong = runs_back_up(edges(modules(PACKAGE)), PLACES)
    assert not wrong, "imports into a higher layer:\n" + "\n".join(wrong)


def test_no_imports_form_a_circle():
    circle = a_circle(edges(modules(PACKAGE)))
    assert circle is None, "imports form a circle: " + " -> ".join(circle or [])


def test_the_candidates_side_imports_nothing_of_the_judge():
    wrong = reaches_the_judge(edges(modules(PACKAGE)), PLACES)
    assert not wrong, "the candidate's side imports the judge's:\n" + "\n".join(wrong)


def test_the_trust_side_check_catches_the_worker_importing_the_harness():
    found = [
        Edge("pkg.eval.candidate.worker", "pkg.eval.harness", 3),
        Edge("pkg.eval.candidate.worker", "pkg.eval.wire.messages", 4),
        Edge("pkg.eval.candidate.worker", "pkg.eval.ops", 5),
        Edge("pkg.eval.wire.buffers", "pkg.eval.timing", 6),
        Edge("pkg.eval.harness", "pkg.eval.candidate.worker", 7),
    ]
    places = {"eval/": "eval", "eval/ops": "policy"}
    assert reaches_the_judge(found, places) == [
        "pkg.eval.candidate.worker imports pkg.eval.harness at line 3",
        "pkg.eval.wire.buffers imports pkg.eval.timing at line 6",
    ]


def test_the_checker_catches_a_lazy_up_import_and_a_circle_but_not_type_checking(tmp_path):
    """The checks above on a package made to break them: a lazy import into a higher layer, a circle through a
    relative import, and a circle closed only under `if TYPE_CHECKING:`, which never runs."""
    root = tmp_path / "pkg"
    (root / "low").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "low" / "__init__.py").write_text("")
    (root / "low" / "a.py").write_text("def f():\n    from pkg.high import h\n\n    return h\n")
    (root / "low" / "b.py").write_text("from . import c\n")
    (root / "low" / "c.py").write_text("import pkg.low.b\n")
    (root / "high.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg.top import t\n")
    (root / "top.py").write_text("import pkg.high\n")
    places = {"__init__": "core", "low/": "core", "high": "host", "top": "policy"}
    found = edges(modules(root))
    assert sorted(found) == [
        Edge("pkg.low.a", "pkg.high", 2),
        Edge("pkg.low.b", "pkg.low.c", 1),
        Edge("pkg.low.c", "pkg.low.b", 1),
        Edge("pkg.top", "pkg.high", 1),
    ]
    assert runs_back_up(found, places) == ["pkg.low.a (core) imports pkg.high (host) at line 2"]
    assert a_circle(found) == ["pkg.low.b", "pkg.low.c", "pkg.low.b"]
    assert a_circle([e for e in found if e.importer != "pkg.low.c"]) is None
    assert runs_back_up([Edge("pkg.live", "pkg.eval", 1)], {"live": "live", "eval": "eval"}) == [
        "pkg.live (live) imports pkg.eval (eval) at line 1"
    ]
