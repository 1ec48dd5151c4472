"""The package's pydantic models share one base, `jg_mcp.models.Strict` (AGENTS.md rule 2): a misspelt key fails
loudly everywhere, and no module keeps a base of its own. Every module under jg_mcp/ is parsed, never imported."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jg_mcp"

TOOL_RESULTS = {
    "live/runner.py": {"CommandResult"},
    "live/server.py": {"FileText", "WriteResult"},
    "gpu.py": {"Device", "GpuReport"},
}
"""The tools' structured results, on BaseModel: their JSON schema is the output schema the agent is shown, which
`Strict` would change (no additional properties, each field's docstring as its description)."""


def _bases() -> tuple[set[tuple[str, str]], list[str]]:
    """(module path, class) for every class built directly on pydantic's BaseModel, and every `ConfigDict(extra=...)`
    outside models.py (a base that forbids or allows extra keys by itself)."""
    plain, ad_hoc = set(), []
    for path in PACKAGE.rglob("*.py"):
        where = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("BaseModel") for b in node.bases):
                plain.add((where, node.name))
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("ConfigDict") and where != "models.py":
                ad_hoc += [f"{where}:{node.lineno}" for k in node.keywords if k.arg == "extra"]
    return plain, ad_hoc


def test_every_model_but_the_tools_results_is_strict_and_no_module_has_a_base_of_its_own() -> None:
    plain, ad_hoc = _bases()
    allowed = {("models.py", "Strict")} | {(m, c) for m, classes in TOOL_RESULTS.items() for c in classes}
    assert sorted(plain - allowed) == []
    assert ad_hoc == []
