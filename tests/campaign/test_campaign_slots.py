"""Campaign scheduling with agents that fail fast: one run per GPU slot, the per-run timeout, dry runs."""

from __future__ import annotations

import pytest

from jg_mcp.campaign.run import load_record
from tests.support import DEMO_GOAL, jg

pytestmark = pytest.mark.slow


def test_runs_get_one_gpu_each_and_a_run_past_its_timeout_is_killed_and_recorded(tmp_path):
    campaign = tmp_path / "c.yaml"
    campaign.write_text(f"""\
agents:
  - {{adapter: command, label: crash, agent_cmd: "sh -c 'exit 3' {{mcp_config}}"}}
  - {{adapter: command, label: hang, agent_cmd: "sh -c 'sleep 300' {{mcp_config}}"}}
goals: [{DEMO_GOAL}]
seeds: [0, 1]
gpus: [0, 1]
run_timeout_minutes: 0.25
grace_s: 1
""")
    dry = jg("campaign", campaign, "--out", tmp_path / "runs", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.split() == [
        "todo", "crash__axpy__goal-only__s0", "todo", "crash__axpy__goal-only__s1",
        "todo", "hang__axpy__goal-only__s0", "todo", "hang__axpy__goal-only__s1"]
    proc = jg("campaign", campaign, "--out", tmp_path / "runs", timeout=240)
    assert proc.returncode == 0, proc.stderr
    for seed in (0, 1):
        crash = load_record(tmp_path / "runs" / f"crash__axpy__goal-only__s{seed}")
        assert crash.exit_reason.startswith("agent exited (code 3)") and crash.eval.status == "no solution"
        hang = load_record(tmp_path / "runs" / f"hang__axpy__goal-only__s{seed}")
        assert hang.exit_reason.startswith("campaign run timeout: the run took over 15s and was killed")
    gpus = {load_record(p.parent).gpu for p in (tmp_path / "runs").glob("crash*/run.json")}
    assert gpus <= {"0", "1"} and gpus != set()
    assert "on GPU 0" in proc.stderr and "on GPU 1" in proc.stderr
