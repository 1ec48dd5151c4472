"""Claude Code's CLI registers `jg-mcp serve` and reports it connected (a real connection check)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import GEMM_FP8, node_tool

pytestmark = pytest.mark.slow


def test_claude_mcp_add_then_list_reports_connected(tmp_path):
    claude = node_tool("claude")
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    serve = [
        "jg-mcp",
        "serve",
        "--goal",
        str(GEMM_FP8),
        "--workspace",
        str(tmp_path / "ws"),
        "--transcripts",
        str(tmp_path / "tr"),
    ]
    add = subprocess.run(
        [str(claude), "mcp", "add", "jg", "--", *serve],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert add.returncode == 0, add.stderr
    listed = subprocess.run(
        [str(claude), "mcp", "list"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith("jg:"))
    assert "Connected" in line, listed.stdout
    assert list((tmp_path / "tr").glob("*.jsonl")), "the health check's session left no transcript"
