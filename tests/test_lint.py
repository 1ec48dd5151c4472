"""The gates fail the suite too, not only .ci/run: ruff check, ruff format --check and mypy, each with the
project's configuration in pyproject.toml.

Code that only runs on a GPU (the eval's timing phase, NVML sampling) is never executed in CI; this is
what checks it there.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


GATES = {
    "ruff check": ["ruff", "check", "--no-cache", "."],
    "ruff format": ["ruff", "format", "--check", "--no-cache", "."],
    "mypy": ["mypy"],
}
"""The same commands as .ci/run, run as modules of this interpreter's environment."""


@pytest.mark.slow
@pytest.mark.parametrize("gate", GATES)
def test_the_gate_passes(gate):
    done = subprocess.run(
        [sys.executable, "-m", *GATES[gate]], cwd=REPO, capture_output=True, text=True, check=False, timeout=600
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_no_test_module_imports_from_another_test_module_or_from_conftest():
    """Shared helpers live in tests/support.py: importing a test module runs its module-level code again under
    a second name and couples unrelated tests; conftest holds fixtures and hooks, not importable helpers."""

    def forbidden(module: str) -> bool:
        last = module.rsplit(".", 1)[-1]
        return last == "conftest" or last.startswith("test_")

    found = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                base = "." * node.level + (node.module or "")
                names = [base] if node.module else [f"{base}{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [f"{path.relative_to(REPO)}:{node.lineno} imports {n}" for n in names if forbidden(n)]
    assert not found, "import shared helpers from tests/support.py instead:\n" + "\n".join(found)


RUN_HISTORY = re.compile(r"\b(?:runs?|stops?) [0-9]+(?:[-–][0-9]+)?\b", re.IGNORECASE)
"""A GPU run or a session's stop cited by its number ("run 29", "runs 31-49", "stop 35")."""


def test_code_cites_the_decision_not_the_run_that_measured_it():
    """A reason in code points at its note in docs/decisions/, which says what was measured and on which run; a run
    number alone sends a reader through eval/results/h200/check.md's history to learn why."""
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for root in ("jg_mcp", "eval", "tests")
        for path in sorted((REPO / root).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if path.name != "test_lint.py" and RUN_HISTORY.search(line)
    ]
    assert not found, "cite the docs/decisions/ note instead:\n" + "\n".join(found)
    assert RUN_HISTORY.search("On the H200 (run 28) the") and RUN_HISTORY.search("in runs 31-49 it stayed")
    assert not RUN_HISTORY.search("each run's parts") and not RUN_HISTORY.search("a run of 4 shapes")


@pytest.mark.slow
def test_a_hung_test_fails_with_its_stack_instead_of_stalling_the_suite(request, tmp_path):
    """A hang once stalled CI past its 90 minutes and printed nothing that named the test: the suite's `timeout`
    (pytest-timeout) fails it instead, and the rest of the suite still runs in the time CI has."""
    assert 0 < float(request.config.getini("timeout")) <= 1800
    (tmp_path / "test_hangs.py").write_text(
        "import threading\n\n\ndef test_hangs():\n    threading.Event().wait()\n\n\n"
        "def test_after():\n    assert True\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-o", "timeout=3", "test_hangs.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "1 failed, 1 passed" in done.stdout, done.stdout[-3000:]
    assert "Timeout" in done.stdout and "test_hangs.py" in done.stdout and time.monotonic() - started < 60
