"""`jg-mcp demo` runs a whole recorded session end to end, then the eval and the audit on what it left."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jg_mcp.transcript import read_transcript

pytestmark = pytest.mark.slow


def test_demo_runs_a_session_and_leaves_a_closed_transcript(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "jg_mcp", "demo", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "demo succeeded" in proc.stdout and "OK device=" in proc.stdout
    transcript = next((tmp_path / "transcripts").glob("*.jsonl"))
    result = read_transcript(transcript)
    assert result.closed
    manifest = result.events[-1].manifest
    assert {"solution.py", "check.py", "listing.txt", "reference.py"} <= set(manifest)
    assert (tmp_path / "workspace" / "listing.txt").exists()
    assert "axpy: ACCEPTED" in proc.stdout and "audit clean" in proc.stdout
    assert (tmp_path / "eval.json").is_file() and (tmp_path / "session.html").is_file()
