"""While a baseline is timed no candidate code runs: the harness stops the candidate's whole process tree (SIGSTOP)
from outside, so neither a thread of its worker nor a process it started can slow the baselines (on a GPU, by
queueing work beside theirs) and inflate its speedup."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time

import pytest
from eval_suite import CPU_TIMING, eval_solution

from jg_mcp.eval.processes.process import WorkerLaunch, WorkerProcess
from jg_mcp.eval.processes.proctree import carrying, resume, state, stop_all, tree
from jg_mcp.eval.wire.messages import Block, DoBench

HONEST = "import torch\n\n\ndef kernel(x, y, alpha):\n    return torch.addcmul(y, x, alpha)\n"
SPINNERS = """
import os, time
if os.fork() == 0:
    if os.fork() == 0:  # an orphan in a session of its own: not in the tree once its parent is gone
        os.setsid()
        while True:
            pass
    os._exit(0)
if os.fork() == 0:
    while True:
        pass
print("up", flush=True)
while True:
    pass
"""


def test_a_forking_tree_and_its_orphans_are_all_stopped_and_then_resumed():
    token = secrets.token_hex(8)
    env = os.environ | {"JG_EVAL_TOKEN": token}
    root = subprocess.Popen([sys.executable, "-c", SPINNERS], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert root.stdout.readline() == "up\n"
        time.sleep(0.2)  # the orphan has left the tree

        def find() -> list[int]:
            return sorted(set(tree(root.pid)) | set(carrying(token)))

        def living() -> set[int]:
            return {pid for pid in find() if state(pid) != "Z"}  # the orphan's parent is a zombie

        assert len(living()) == 3 and living() - set(tree(root.pid)), "the orphan is found by its token only"
        stopped = stop_all(find)
        assert stopped is not None and set(stopped) == living()
        time.sleep(0.05)
        assert {state(pid) for pid in living()} == {"T"}, "no process of the tree runs"
        resume(stopped)
        time.sleep(0.05)
        assert "T" not in {state(pid) for pid in living()}, "every process runs again"
    finally:
        for pid in find():
            os.kill(pid, signal.SIGKILL)
        root.wait()


def test_no_candidate_process_runs_while_a_baseline_is_timed(tmp_path, timing_goal, monkeypatch):
    """Checked at every block and do_bench the baseline process is sent: each live candidate process's tree is
    stopped then; and an honest candidate is still accepted."""
    made: list[WorkerProcess] = []
    checked: list[set[str]] = []
    init, send = WorkerProcess.__init__, WorkerProcess.send

    def spy_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    def spy_send(self, message, binding=None):
        if self.role == "baseline" and isinstance(message, (Block, DoBench)):
            live = [p for p in made if p.role == "candidate" and p.proc.poll() is None]
            checked.append({state(pid) for p in live for pid in tree(p.proc.pid)})
        return send(self, message, binding)

    monkeypatch.setattr(WorkerProcess, "__init__", spy_init)
    monkeypatch.setattr(WorkerProcess, "send", spy_send)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "solution.py").write_text(HONEST)
    report = eval_solution(tmp_path / "src" / "solution.py", timing_goal, tmp_path / "runs", **CPU_TIMING)
    assert report.accepted, [f.detail for f in report.findings]
    assert len(checked) >= 10
    assert all(states == {"T"} for states in checked), checked


@pytest.mark.slow
def test_a_freeze_finds_its_own_process_and_the_sweep_every_candidate_process_and_no_baseline(tmp_path):
    """Unsandboxed, a candidate's processes are found by the token in their environment. Each worker has one of
    its own under the eval's: with one for all, the correctness process's freeze stopped the timing process (which
    nothing resumed), and the candidate's freeze stopped a baseline's process while it was timed (on the H200). A
    baseline's process carries none; a token that only begins like another is not under it."""
    token = secrets.token_hex(8)
    workers = [
        WorkerProcess.spawn(WorkerLaunch("candidate", tmp_path, False, token, 30.0, "cpu")),
        WorkerProcess.spawn(WorkerLaunch("candidate", tmp_path, False, token, 30.0, "cpu")),
        WorkerProcess.spawn(WorkerLaunch("baseline", tmp_path, False, token, 30.0, "cpu")),
        WorkerProcess.spawn(WorkerLaunch("candidate", tmp_path, False, token + "0", 30.0, "cpu")),
    ]
    first, second, baseline, other = workers
    try:
        for w in workers:
            w.wait_started()  # each has forked what it forks before its setup (its watchdog)
        assert set(carrying(first.token)) == set(tree(first.proc.pid))
        assert set(carrying(token)) == set(tree(first.proc.pid)) | set(tree(second.proc.pid))
        assert baseline.proc.pid not in carrying(token) and other.proc.pid not in carrying(token)
    finally:
        for w in workers:
            w.close()
