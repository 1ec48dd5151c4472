"""Spares: the worker processes an eval starts ahead for the next one (jg_mcp/eval/processes/spares.py)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from eval_suite import CPU_TIMING

from jg_mcp.eval import EvalOptions, EvalReport, evaluate
from jg_mcp.eval.processes.isolation import bwrap_problem
from jg_mcp.eval.processes.process import WorkerProcess
from jg_mcp.eval.processes.spares import Spares
from jg_mcp.eval.reasons import Reason
from tests.support import DEMO_GOAL

pytestmark = pytest.mark.skipif(
    bwrap_problem() is not None, reason="no bubblewrap: spares are made only for sandboxed candidates"
)
HONEST = "import torch\n\n\ndef kernel(x, y, alpha):\n    return torch.addcmul(y, x, alpha)\n"
WRONG = "import torch\n\n\ndef kernel(x, y, alpha):\n    return torch.addcmul(x, y, alpha)\n"
FORGE_STARTED = """import json
import os
import struct

import torch

body = json.dumps({"event": "started"}).encode()
for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
    if fd > 2:
        try:
            os.write(fd, struct.pack("<Q", len(body)) + body)
        except OSError:
            pass


def kernel(x, y, alpha):
    return torch.addcmul(y, x, alpha)
"""


def run(root: Path, text: str, goal: Path, spares: Spares | None, **options) -> EvalReport:
    ws = root / f"ws{len(list(root.glob('ws*')))}"
    ws.mkdir(parents=True)
    (ws / "solution.py").write_text(text)
    defaults = {"device": "cpu", "shapes": "smoke", "domain_shapes": 0, "timeout_s": 90.0, "isolation": "bwrap"}
    return evaluate(EvalOptions(goal=goal, workspace=ws, **(defaults | options)), spares=spares)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def record_starts(monkeypatch) -> list[tuple[str, float]]:
    """Each worker process's role and birth time, as evals hand it its setup (taken from a spare set or new)."""
    started: list[tuple[str, float]] = []
    real_start = WorkerProcess.start

    def start(self, setup):
        started.append((self.role, self.born))
        real_start(self, setup)

    monkeypatch.setattr(WorkerProcess, "start", start)
    return started


def test_evals_in_a_row_take_the_processes_started_ahead_and_reach_the_same_verdicts(
    tmp_path, timing_goal, monkeypatch
):
    """The second and third evals start no process of their own: each takes the two candidate processes and the
    baseline process the eval before started, born before it began; the verdicts are what they are without."""
    started = record_starts(monkeypatch)
    from jg_mcp.eval.timing import TimingPhase

    real_run, imported_when_timed = TimingPhase.run, []

    def run_timing(self, report, cases):
        imported_when_timed.append([p.started for p in spares.idle.procs] if spares.idle else None)
        real_run(self, report, cases)

    monkeypatch.setattr(TimingPhase, "run", run_timing)
    real_settle = Spares.settle

    def settle(self):
        time.sleep(0.3)
        real_settle(self)

    monkeypatch.setattr(Spares, "settle", settle)
    reports, taken = [], []
    with Spares() as spares:
        for text in (HONEST, WRONG, HONEST):
            begin, first = time.monotonic(), len(started)
            reports.append(run(tmp_path, text, timing_goal, spares, **CPU_TIMING))
            taken.append((begin, started[first:]))
        left = spares.idle
        assert left is not None and spares.taken == 2
        pids, work = [p.proc.pid for p in left.procs], left.work
    for i, (begin, procs) in enumerate(taken):
        assert sorted(role for role, _ in procs) == ["baseline", "candidate", "candidate"]
        assert all((born < begin) == (i > 0) for _, born in procs), (i, begin, procs)
    assert reports[0].accepted and reports[2].accepted, [r.findings for r in reports]
    assert not reports[1].accepted and Reason.INCORRECT in reports[1].reasons
    assert not work.exists() and all(gone(p) for p in pids), "closing the spares ends what no eval took"
    assert imported_when_timed == [[True, True, True]] * 3, "no spare may still be importing while an eval times"
    assert all(r.phases["spares_wait"] >= 0.3 for r in reports), "the wait for the spares is a phase of its own"


SEES_COVER = """import torch

COVERED = open("/usr/lib/os-release").read()


def kernel(x, y, alpha):
    return torch.addcmul(y, x, alpha) if COVERED == "stubbed\\n" else x
"""


@pytest.mark.slow
def test_the_spares_cover_what_the_running_evals_sandbox_covers(tmp_path, monkeypatch):
    """A goal that forbids a library (cuBLAS, for the GEMM goals on a GPU) has it covered by a stub in its
    candidates' sandboxes; the spares an eval starts cover the same files, so the next eval of the goal takes them
    instead of starting its own (here a system file is covered, and the candidate is correct only if it reads the
    stub)."""
    from jg_mcp.eval.harness import Evaluation

    stub = tmp_path / "stub"
    stub.write_text("stubbed\n")
    monkeypatch.setattr(Evaluation, "stubbed", lambda self, report: ((str(stub), "/usr/lib/os-release"),))
    started = record_starts(monkeypatch)
    with Spares() as spares:
        assert run(tmp_path, SEES_COVER, DEMO_GOAL, spares).accepted
        begin, first = time.monotonic(), len(started)
        report = run(tmp_path, SEES_COVER, DEMO_GOAL, spares)
        assert report.accepted, report.findings
        assert spares.taken == 1
        assert [(role, born < begin) for role, born in started[first:]] == [("candidate", True)]


@pytest.mark.slow
@pytest.mark.parametrize("why", ["died", "waited too long"])
def test_a_spare_set_that_died_or_waited_too_long_is_thrown_away(tmp_path, why):
    with Spares(max_idle_s=0.0 if why == "waited too long" else 600.0) as spares:
        assert run(tmp_path, HONEST, DEMO_GOAL, spares).accepted
        assert spares.idle is not None
        [spare] = spares.idle.procs
        work = spares.idle.work
        if why == "died":
            os.killpg(spare.proc.pid, signal.SIGKILL)
            spare.proc.wait()
        report = run(tmp_path, HONEST, DEMO_GOAL, spares)
        assert spares.taken == 0 and report.accepted, report.findings
        assert not work.exists()


@pytest.mark.slow
def test_unsandboxed_evals_start_no_spares(tmp_path):
    """Without bubblewrap a spare would be within reach of the running eval's candidate (same user, same pid
    namespace): none is made."""
    with Spares() as spares:
        assert run(tmp_path, HONEST, DEMO_GOAL, spares, isolation="none").accepted
        assert spares.idle is None


@pytest.mark.slow
def test_a_forged_started_message_is_tampering(tmp_path):
    report = run(tmp_path, FORGE_STARTED, DEMO_GOAL, None)
    assert not report.accepted and Reason.TAMPERED in report.reasons, report.findings
    assert any("`started` a second time" in f.detail for f in report.findings)


@pytest.mark.slow
def test_an_eval_that_cannot_start_leaves_neither_its_spares_nor_its_work(tmp_path):
    """A goal that does not load fails the eval before it runs: the spare set it took and its work directory are
    gone all the same (nothing idles until the harness exits)."""
    bad = tmp_path / "goal"
    bad.mkdir()
    (bad / "broken.yaml").write_text("name: broken\n")
    (bad / "broken.py").write_text("")
    with Spares() as spares:
        run(tmp_path, HONEST, DEMO_GOAL, spares)
        assert spares.idle is not None
        pids, work = [p.proc.pid for p in spares.idle.procs], spares.idle.work
        with pytest.raises(Exception, match="broken"):
            run(tmp_path, HONEST, bad / "broken.yaml", spares)
        assert spares.idle is None
        assert all(gone(p) for p in pids) and not work.exists()


@pytest.mark.slow
def test_a_spare_that_cannot_start_costs_the_running_eval_nothing(tmp_path, monkeypatch):
    """Starting the next eval's set is a favour to that eval: when a process of it cannot start (here the second),
    the running eval goes on to its verdict, what was started is ended and its directory removed."""
    import jg_mcp.eval.processes.spares as spares_module

    made: list[WorkerProcess] = []

    def flaky(launch):
        if made:
            raise OSError("no more processes")
        made.append(WorkerProcess.spawn(launch))
        return made[-1]

    monkeypatch.setattr(spares_module, "WorkerProcess", SimpleNamespace(spawn=flaky))
    with Spares() as spares:
        spares.prestart("cpu", 30.0, candidates=2, baseline=False)
        assert spares.idle is None
        [first] = made
        assert gone(first.proc.pid) and not first.log_path.parent.exists()
        report = run(tmp_path, HONEST, DEMO_GOAL, spares)
        assert report.accepted and spares.idle is None, report.findings
