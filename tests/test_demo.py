"""`jg-mcp demo` runs a whole recorded session end to end, then the eval and the audit on what it left."""

from __future__ import annotations

import re

import pytest

from jg_mcp.gpu import query_gpu
from jg_mcp.record import steps
from jg_mcp.record.reading import read_transcript
from tests.support import demo

pytestmark = pytest.mark.slow

ROW = re.compile(r"^ ?(\d+|-)\. \[(ok |ERR)\] (\S+)")


def test_demo_runs_a_session_and_leaves_a_closed_transcript():
    """On the demo run shared with the replay, audit and page tests (tests.support.demo), which only read it."""
    run = demo()
    lines, out = list(run.lines), run.out
    stdout = "\n".join(lines)
    assert run.code == 0, stdout + run.stderr
    assert "demo succeeded" in stdout and "OK device=" in stdout
    transcript = next((out / "transcripts").glob("*.jsonl"))
    result = read_transcript(transcript)
    assert result.closed
    manifest = result.events[-1].manifest
    assert {"solution.py", "check.py", "listing.txt", "reference.py"} <= set(manifest)
    assert (out / "workspace" / "listing.txt").exists()
    assert "axpy: ACCEPTED" in stdout and "audit clean" in stdout
    assert (out / "eval.json").is_file() and (out / "session.html").is_file()
    assert "None" not in stdout
    if not query_gpu().available:
        assert "axpy: ACCEPTED; timing skipped: no CUDA device" in stdout, "stdout says that timing was skipped"

    assert run.live, "each step is printed as it completes, not when the session ends"
    rows = [m.groups() for m in map(ROW.match, lines) if m]
    numbered = [(int(n), tool) for n, _, tool in rows if n != "-"]
    calls = steps.load_record(transcript).calls
    assert numbered == [(c.step, c.tool) for c in calls], "the demo numbers steps as replay and audit do"
    assert [tool for n, _, tool in rows if n == "-"] == ["list_tools", "goal://axpy"]
    refused = next(n for n, status, tool in rows if status == "ERR")
    assert f"step {refused}: read_file was refused" in stdout, "the audit names the refused call by the same number"


def test_a_server_that_fails_to_start_is_one_line_not_a_task_group(monkeypatch, tmp_path, capsys):
    import anyio

    from jg_mcp.cli import main

    def broken(*args, **kwargs):
        raise ExceptionGroup("unhandled errors in a TaskGroup", [ConnectionError("Connection closed")])

    monkeypatch.setattr(anyio, "run", broken)
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "server session failed (ConnectionError: Connection closed)" in err[0]
