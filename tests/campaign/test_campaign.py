"""Campaigns of the scripted agent end to end: runs, a killed campaign resumed, the table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jg_mcp.campaign.run_record import RUN_FILE, load_run
from tests.support import DEMO_GOAL, jg

pytestmark = pytest.mark.slow
# The sandbox is off in these campaigns (bubblewrap's set-up per session triples a scripted run's time here);
# the stall and the Claude Code runs keep the default, auto.

SOLVE = """\
agents: [{adapter: scripted}]
goals: [%s]
conditions: [goal-only, eval-tool]
budget: {wall_clock_minutes: 2}
eval_args: [--domain-shapes, "0"]
sandbox: none
cpu_slots: 1
grace_s: 3
"""
"""Two runs, one at a time: the campaign killed as the first one finishes has exactly one finished run (seeds and
the table's counting over them: test_campaign_slots' dry runs and test_table; runs side by side: FAILING)."""
FAILING = """\
agents: [{adapter: scripted-idle}, {adapter: scripted-overrun}]
goals: [axpy_copy.yaml]
conditions: [knowledge]
budget: {wall_clock_minutes: 0.1}
sandbox: none
cpu_slots: 2
grace_s: 3
"""


def run_dir(out: Path, prefix: str) -> Path:
    """The one run directory under `out` whose id starts with `prefix` (ids end in a key of the run's identity)."""
    [found] = [d for d in out.iterdir() if d.name.startswith(prefix + "__")]
    return found


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def kill_everything_working_in(out: Path) -> None:
    """SIGKILL every process whose command line names `out`, with its process group: what a killed campaign leaves
    (its run workers and their agents start sessions of their own) would otherwise go on writing there."""
    ours = os.getpgid(0)
    for entry in Path("/proc").iterdir():
        try:
            if str(out).encode() not in (entry / "cmdline").read_bytes():
                continue
            pid = int(entry.name)
            if os.getpgid(pid) == ours:
                os.kill(pid, signal.SIGKILL)
            else:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def test_a_killed_campaign_resumes_skipping_finished_runs_then_the_table_renders(tmp_path, axpy_copy):
    out = tmp_path / "runs"
    solve = tmp_path / "solve.yaml"
    solve.write_text(SOLVE % DEMO_GOAL)
    argv = [sys.executable, "-m", "jg_mcp", "--log-level", "WARNING", "campaign", str(solve), "--out", str(out)]
    first = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: list(out.glob(f"*/{RUN_FILE}")), 240, "the first run to finish")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        kill_everything_working_in(out)
    finished = {p.parent.name: p.read_text() for p in out.glob(f"*/{RUN_FILE}")}
    assert len(finished) == 1

    resumed = jg("campaign", str(solve), "--out", str(out), timeout=400)
    assert resumed.returncode == 0, resumed.stderr
    assert "2 runs, 1 finished, 0 failed to start or reached no verdict, 1 to run" in resumed.stderr
    assert "\r" not in resumed.stderr
    for run_id, text in finished.items():
        assert (out / run_id / RUN_FILE).read_text() == text, f"{run_id} was redone"
        assert f"{run_id}: started" not in resumed.stderr
    records = [load_run(p.parent) for p in sorted(out.glob(f"*/{RUN_FILE}"))]
    assert sorted(r.run_id.rsplit("__", 1)[0] for r in records) == [
        f"scripted__axpy__{c}__s0" for c in ("eval-tool", "goal-only")
    ]
    for r in records:
        assert r.eval.status == "accepted", (r.run_id, r.eval, (out / r.run_id / "eval.log").read_text()[-2000:])
        assert r.exit_reason == "agent exited (code 0)" and r.close_reason == "client disconnected"
        assert r.audit_ok and r.condition_violations == []
        header = json.loads((out / r.run_id / r.transcript).read_text().splitlines()[0])
        assert header["condition"] == r.condition
        assert {"eval.json", "eval.md", "audit.json", "session.html", "agent.log", "mcp.json"} <= {
            p.name for p in (out / r.run_id).iterdir()
        }

    failing = tmp_path / "failing.yaml"
    failing.write_text(FAILING)
    ran = jg("campaign", str(failing), "--out", str(out), timeout=300)
    assert ran.returncode == 0, ran.stderr
    idle = load_run(run_dir(out, "scripted-idle__axpy_copy__knowledge__s0"))
    assert idle.eval.status == "no solution" and idle.exit_reason == "agent exited (code 0)"
    over = load_run(run_dir(out, "scripted-overrun__axpy_copy__knowledge__s0"))
    assert over.exit_reason.startswith("budget spent: 0.1 minutes of wall clock; agent stopped"), over.exit_reason
    assert over.close_reason == "budget spent: 0.1 minutes of wall clock"
    assert over.agent_exit_code == -signal.SIGTERM and over.agent_wall_s < 60
    refusals = [json.loads(ln) for ln in (out / over.run_id / "agent.log").read_text().splitlines()]
    assert any("budget spent" in r.get("text", "") and not r["ok"] for r in refusals)

    table = jg("table", str(out), "--csv", str(tmp_path / "t.csv"), "--html", str(tmp_path / "t.html"))
    assert table.returncode == 0, table.stderr
    md = table.stdout
    assert md.startswith(
        "| goal | condition | scripted: accepted | scripted: speedup median [min-max] | scripted: % SOL | "
        "scripted-idle: accepted |"
    )
    assert "| axpy | goal-only | 1/1 | - | - | - | - | - | - | - | - |" in md
    assert "| axpy_copy | knowledge | - | - | - | 0/1 | - | - | 0/1 | - | - |" in md
    assert f"| {idle.run_id} | failed | no solution (agent exited (code 0)) |" in md
    assert f"| {over.run_id} | budget spent | budget spent: 0.1 minutes of wall clock; no solution |" in md
    csv_lines = (tmp_path / "t.csv").read_text().splitlines()
    assert csv_lines[0].startswith("run_id,agent,goal,condition,seed,label") and len(csv_lines) == 5
    page = (tmp_path / "t.html").read_text()
    assert "<svg" in page and "accepted runs (fraction of runs)" in page and "<script" not in page


def test_an_agent_that_cannot_start_leaves_a_run_directory_with_the_reason(tmp_path):
    proc = jg(
        "run",
        "--agent",
        "command",
        "--agent-cmd",
        "no-such-agent-binary {mcp_config}",
        "--goal",
        str(DEMO_GOAL),
        "--out",
        str(tmp_path),
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    record = load_run(run_dir(tmp_path, "command__axpy__goal-only__s0"))
    assert record.exit_reason == "agent could not start: no executable 'no-such-agent-binary' on PATH"
    assert record.status == "failed to start" and record.transcript is None
    assert f"{record.run_id}: failed to start: agent could not start: no executable" in proc.stdout
    assert record.launch.argv == ["no-such-agent-binary", str(tmp_path / record.run_id / "mcp.json")]
    assert os.path.exists(tmp_path / record.run_id / "prompt.md")


def test_a_run_summarises_its_eval_report_and_says_in_one_line_when_the_report_is_not_one(tmp_path):
    from jg_mcp.campaign.run import summarize_eval
    from tests.support import eval_report

    good, partial = tmp_path / "eval.json", tmp_path / "partial.json"
    good.write_text(json.dumps(eval_report("a" * 64, "b" * 64, speedup=1.5)))
    partial.write_text(json.dumps({"accepted": True}))
    summary = summarize_eval(good, 0)
    assert (summary.status, summary.geomean_speedup, summary.device) == ("accepted", 1.5, "cpu")
    broken = summarize_eval(partial, 0)
    assert broken.status == "error"
    [reason] = broken.reasons
    assert (
        reason.startswith(f"eval exit 0, report unusable: {partial}: not a jg-mcp eval report: ") and "\n" not in reason
    )


SUPERVISE_THEN_WAIT = """
import sys
from pathlib import Path
from jg_mcp.campaign import Launch
from jg_mcp.campaign.supervise import Watch, supervise
run_dir = Path(sys.argv[1])
launch = Launch(argv=["bash", "-c", f"exec -a {sys.argv[2]} sleep 600"], cwd=str(run_dir))
supervise(launch, run_dir, {"PATH": "/usr/bin:/bin"}, Watch(run_dir, budget_s=600, startup_s=600, grace_s=1))
"""


@pytest.mark.parametrize("delay_s", [0.0, 0.5])
def test_a_run_worker_killed_outright_takes_its_agent_down(tmp_path, delay_s):
    """The agent runs in a session of its own (so the runner can stop its whole group); a run worker SIGKILLed
    (the OOM killer, a timeout's last resort) runs no handler, and its agent must not run on, unwatched, spending
    its budget: right after the spawn, or once the agent is running."""
    marker = f"jg-agent-{os.getpid()}-{int(delay_s * 10)}-{time.monotonic_ns()}"
    worker = subprocess.Popen([sys.executable, "-c", SUPERVISE_THEN_WAIT, str(tmp_path), marker])

    def running() -> list[int]:
        done = subprocess.run(["pgrep", "-f", f"^{marker}"], capture_output=True, text=True)
        return [int(p) for p in done.stdout.split()]

    wait_for(lambda: (tmp_path / "agent.log").exists(), 60, "the agent's start")
    time.sleep(delay_s)
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)
    time.sleep(2)
    survivors = running()
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert not survivors, "the agent outlived its run worker"
