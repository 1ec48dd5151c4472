"""The gates fail the suite too, not only .ci/run: ruff check, ruff format --check and mypy, each with the
project's configuration in pyproject.toml.

Code that only runs on a GPU (the eval's timing phase, NVML sampling) is never executed in CI; this is
what checks it there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


GATES = {
    "ruff check": ["ruff", "check", "--no-cache", "."],
    "ruff format": ["ruff", "format", "--check", "--no-cache", "."],
    "mypy": ["mypy"],
}
"""The same commands as .ci/run, run as modules of this interpreter's environment."""


@pytest.mark.parametrize("gate", GATES)
def test_the_gate_passes(gate):
    done = subprocess.run(
        [sys.executable, "-m", *GATES[gate]], cwd=REPO, capture_output=True, text=True, check=False, timeout=600
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
