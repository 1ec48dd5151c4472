"""A newcomer follows a verdict through at most six files of jg_mcp/eval/ (docs/eval.md, "Follow a verdict"): the
files the list names exist, each a module of one concept, and the list is the path the code takes, each file
importing the next where it hands the verdict on."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EVAL = REPO / "jg_mcp" / "eval"


def _listed() -> list[str]:
    text = (REPO / "docs" / "eval.md").read_text()
    section = text.split("**Follow a verdict**", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\d+\. `([a-z_]+\.py)`", section, flags=re.M)


def _imports(module: str) -> set[str]:
    tree = ast.parse((EVAL / module).read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jg_mcp.eval."):
            found.add(node.module.removeprefix("jg_mcp.eval.") + ".py")
    return found


def test_a_verdict_is_followed_through_at_most_six_files_that_exist_and_stay_small():
    files = _listed()
    assert 3 <= len(files) <= 6, files
    for name in files:
        path = EVAL / name
        assert path.is_file(), name
        assert len(path.read_text().splitlines()) <= 400, f"{name}: over 400 lines is two concepts"


def test_the_listed_files_are_the_path_the_harness_takes():
    harness, *rest = _listed()
    assert harness == "harness.py"
    reached = _imports(harness)
    assert {"correctness.py", "timing.py", "scoring.py", "report.py"} <= reached | {"harness.py"}, reached
    assert "turns.py" in _imports("timing.py"), "timing hands each block to turns"
    assert set(rest) <= reached | _imports("timing.py")
