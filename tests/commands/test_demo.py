"""`jg-mcp demo` runs a whole recorded session end to end, then the eval and the audit on what it left."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from jg_mcp.gpu import query_gpu
from jg_mcp.record import steps
from jg_mcp.record.reading import read_transcript
from tests.support import REPO, demo

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


def test_the_demo_marks_its_deliberate_moves_as_expected_and_says_what_to_try_next():
    run = demo()
    lines = list(run.lines)
    refused = next(i for i, ln in enumerate(lines) if "policy/refused" in ln and "read_file was refused" in ln)
    assert "(expected: the demo's last step tries to leave the workspace on purpose)" in lines[refused + 1]
    warnings = [ln for ln in lines if ln.startswith("WARNING ")]
    assert len(warnings) == 1, "the refused read is the audit's only warning (the transcript is keyed, no pycache)"
    replay = next(ln for ln in lines if ln.startswith("  the workspace as it was after step 3: ")).split(": ", 1)[1]
    words = replay.split()
    assert words[0] == ".venv/bin/jg-mcp" and words[-2:] == ["--step", "3"]
    done = subprocess.run(
        [sys.executable, "-m", "jg_mcp", *words[1:]], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert (run.out / "replay-3" / "solution.py").is_file() and not (run.out / "replay-3" / "check.py").exists()


def test_the_demo_warns_of_no_directory_it_made_itself():
    """The demo makes its --out folder its owner's alone, so the server has no searchable parent to warn about (it
    did, on every run as root with bubblewrap, of the folder the demo had just made). The shared run's --out did
    not exist before it (tests.support.demo)."""
    run = demo()
    assert run.code == 0, "\n".join(run.lines)[-3000:] + run.stderr[-3000:]
    assert "warning" not in run.stderr.lower(), run.stderr
    assert run.out.stat().st_mode & 0o777 == 0o700


def test_the_committed_example_was_recorded_with_the_sandbox_on_in_the_current_formats():
    """eval/examples/ is regenerated from `jg-mcp demo --out /tmp/ex`, run as root with bubblewrap: the page that the
    README shows a newcomer is the one the demo makes now (a keyed transcript, so no authenticity warning)."""
    import json

    from jg_mcp.eval.report import REPORT_VERSION

    page = (REPO / "eval" / "examples" / "demo-axpy-session.html").read_text()
    assert "<tr><td>sandbox</td><td>bwrap</td></tr>" in page
    assert "python -B check.py" in page and "authenticity" not in page
    report = json.loads((REPO / "eval" / "examples" / "demo-axpy-eval.json").read_text())
    assert report["version"] == REPORT_VERSION and report["accepted"]
