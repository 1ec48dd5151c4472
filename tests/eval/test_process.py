"""The candidate process dies with the harness: a harness killed with SIGKILL leaves no candidate running, nor
anything the candidate started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from eval_suite import GOALS


HANG_AFTER_MARK = """
import subprocess
from pathlib import Path


def kernel(a, b, scale_a, scale_b):
    sleeper = subprocess.Popen(["sleep", "300"])
    Path({mark!r}).write_text(str(sleeper.pid))
    while True:
        pass
"""


def _candidates_of(parent: int) -> list[int]:
    """Pids of jg_mcp.eval.child processes started by `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if b"jg_mcp.eval.child" in argv and ppid == parent:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a reaper."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(predicate, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    return predicate()


def test_a_killed_harness_leaves_no_candidate_process(tmp_path):
    ws, mark = tmp_path / "ws", tmp_path / "called"
    ws.mkdir()
    (ws / "solution.py").write_text(HANG_AFTER_MARK.format(mark=str(mark)))
    argv = [sys.executable, "-m", "jg_mcp", "eval", "--goal", str(GOALS / "gemm_fp8.yaml"), "--workspace", str(ws)]
    harness = subprocess.Popen(argv + ["--shapes", "smoke", "--device", "cpu", "--timeout", "300"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children = None
    try:
        children = _wait_for(lambda: _candidates_of(harness.pid), 120)
        assert children, "the harness never started a candidate process"
        assert _wait_for(mark.exists, 120), "the candidate was never called"
        started = int(_wait_for(mark.read_text, 5))
        assert _alive(started)
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        left = _wait_for(lambda: not [p for p in children if _alive(p)], 10)
        assert left, f"candidate processes {children} outlived the harness"
        assert _wait_for(lambda: not _alive(started), 10), f"the process the candidate started ({started}) lived on"
    finally:
        harness.kill()
        for pid in children or []:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
