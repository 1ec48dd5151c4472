"""Static errors fail the suite: undefined names, redefinitions, unused imports, syntax errors.

Code that only runs on a GPU (the eval's timing phase, NVML sampling) is never executed in CI; this is
what checks it there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_no_pyflakes_errors_anywhere():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--isolated",
            "--select",
            "F,E9",
            "jg_mcp",
            "eval",
            "tests",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
