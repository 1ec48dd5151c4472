"""Runs and campaigns with quick agents: GPU slots, the per-run timeout, a stall, a command template, dry runs."""

from __future__ import annotations

import shlex
import sys

import pytest

from jg_mcp.campaign.run_record import load_record
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
        "todo",
        "crash__axpy__goal-only__s0",
        "todo",
        "crash__axpy__goal-only__s1",
        "todo",
        "hang__axpy__goal-only__s0",
        "todo",
        "hang__axpy__goal-only__s1",
    ]
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


def test_an_agent_that_stops_calling_after_its_budget_is_stopped_at_budget_plus_grace(tmp_path):
    proc = jg(
        "run",
        "--agent",
        "scripted-stall",
        "--goal",
        DEMO_GOAL,
        "--budget-minutes",
        "0.05",
        "--grace",
        "1",
        "--out",
        tmp_path,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    record = load_record(tmp_path / "scripted-stall__axpy__goal-only__s0")
    assert record.exit_reason == ("budget spent: 0.05 minutes of wall clock, no tool call after it; agent stopped")
    assert record.agent_wall_s < 30 and record.close_reason is not None and record.eval.status == "no solution"


def test_the_example_campaign_is_valid_and_expands_to_every_combination():
    proc = jg("campaign", "eval/campaigns/example.yaml", "--out", "/nonexistent/runs", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    runs = proc.stdout.split()[1::2]
    assert len(runs) == 2 * 2 * 4 * 3 and len(set(runs)) == len(runs)
    assert "claude-sonnet__gemm_fp8__workflow__s2" in runs and "my-agent__fused_add_rmsnorm__eval-tool__s0" in runs


def test_a_misspelt_campaign_key_is_refused_with_its_name(tmp_path):
    campaign = tmp_path / "c.yaml"
    campaign.write_text(f"agents: [{{adapter: scripted}}]\ngoals: [{DEMO_GOAL}]\nseed: [1]\n")
    proc = jg("campaign", campaign, "--dry-run")
    assert proc.returncode == 1 and "field 'seed' unknown key; did you mean 'seeds'?" in proc.stderr
    missing = jg("campaign", tmp_path / "nope.yaml")
    assert missing.returncode == 2 and "cannot read campaign file" in missing.stderr


def test_a_command_template_agent_runs_end_to_end_and_its_solution_is_accepted(tmp_path):
    template = (
        f"{shlex.quote(sys.executable)} -m jg_mcp.campaign.scripted_agent --mcp-config {{mcp_config}} "
        "--prompt-file {prompt_file}"
    )
    proc = jg(
        "run",
        "--agent",
        "mine",
        "--agent-cmd",
        template,
        "--goal",
        DEMO_GOAL,
        "--sandbox",
        "none",
        "--out",
        tmp_path,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    record = load_record(tmp_path / "mine__axpy__goal-only__s0")
    assert record.agent == "mine" and record.eval.status == "accepted" and record.audit_ok
    assert record.launch.argv[:3] == [sys.executable, "-m", "jg_mcp.campaign.scripted_agent"]
    empty = jg("table", tmp_path / "nothing-here")
    assert empty.returncode == 2 and "is not a directory" in empty.stderr
