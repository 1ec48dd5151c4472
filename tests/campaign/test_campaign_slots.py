"""Runs and campaigns with quick agents: GPU slots, the per-run timeout, a stall, a command template, dry runs."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from jg_mcp.campaign.run_record import load_run
from tests.support import DEMO_GOAL, jg

pytestmark = pytest.mark.slow


def run_dir(out: Path, prefix: str) -> Path:
    """The one run directory under `out` whose id starts with `prefix` (ids end in a key of the run's identity)."""
    [found] = [d for d in out.iterdir() if d.name.startswith(prefix + "__")]
    return found


def test_a_crash_before_any_tool_call_fails_to_start_and_a_run_past_its_timeout_is_killed(tmp_path):
    campaign = tmp_path / "c.yaml"
    campaign.write_text(f"""\
agents:
  - {{adapter: command, label: crash, agent_cmd: "sh -c 'exit 3' {{mcp_config}}"}}
  - {{adapter: command, label: hang, agent_cmd: "sh -c 'sleep 300' {{mcp_config}}"}}
goals: [{DEMO_GOAL}]
seeds: [0, 1]
cpu_slots: 2
run_timeout_minutes: 0.25
grace_s: 1
""")
    dry = jg("campaign", campaign, "--out", tmp_path / "runs", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    words = dry.stdout.split()
    assert words[0::2] == ["todo"] * 4
    assert [w.rsplit("__", 1)[0] for w in words[1::2]] == [
        "crash__axpy__goal-only__s0",
        "crash__axpy__goal-only__s1",
        "hang__axpy__goal-only__s0",
        "hang__axpy__goal-only__s1",
    ]
    proc = jg("campaign", campaign, "--out", tmp_path / "runs", timeout=240)
    assert proc.returncode == 1, proc.stderr
    for seed in (0, 1):
        crash = load_run(run_dir(tmp_path / "runs", f"crash__axpy__goal-only__s{seed}"))
        assert crash.exit_reason.startswith("agent exited (code 3)") and crash.status == "failed to start"
        hang = load_run(run_dir(tmp_path / "runs", f"hang__axpy__goal-only__s{seed}"))
        assert hang.exit_reason.startswith("campaign run timeout: the run took over 15s and was killed")
        assert hang.status == "failed to start"
    assert "campaign done: 0/4 runs finished" in proc.stderr
    assert "2 failed to start: agent exited (code 3)" in proc.stderr
    assert "2 failed to start: campaign run timeout" in proc.stderr


def test_a_campaign_on_gpus_this_machine_lacks_fails_every_run_to_start_and_says_so(tmp_path):
    from jg_mcp.campaign.preflight import gpu_problem

    if gpu_problem(7) is None:
        pytest.skip("this machine has a GPU 7")
    campaign = tmp_path / "c.yaml"
    campaign.write_text(f"agents: [{{adapter: scripted}}]\ngoals: [{DEMO_GOAL}]\ngpus: [7]\n")
    dry = jg("campaign", campaign, "--out", tmp_path / "runs", "--dry-run")
    assert dry.returncode == 1 and "GPU: no GPU 7 on this machine" in dry.stderr, dry.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    proc = jg("campaign", campaign, "--out", tmp_path / "runs", timeout=120)
    assert proc.returncode == 1
    record = load_run(run_dir(tmp_path / "runs", "scripted__axpy__goal-only__s0"))
    assert record.status == "failed to start" and record.exit_reason.startswith("agent could not start: no GPU 7")
    assert "started" not in proc.stderr and "0/1 runs finished" in proc.stderr
    single = jg("run", "--agent", "scripted", "--goal", DEMO_GOAL, "--gpu", "7", "--out", tmp_path / "one")
    assert single.returncode == 1 and ": failed to start: agent could not start: no GPU 7" in single.stdout


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
    record = load_run(run_dir(tmp_path, "scripted-stall__axpy__goal-only__s0"))
    assert record.exit_reason.startswith(
        "budget spent: 0.05 minutes of wall clock, no tool call after it; agent stopped"
    ), record.exit_reason
    assert record.status == "finished", "it made tool calls: a result, not a failed start"
    assert record.agent_wall_s < 30 and record.close_reason is not None and record.eval.status == "no solution"


def test_the_example_campaign_as_shipped_reports_a_missing_agent_and_gpus_not_48_of_48(tmp_path):
    from jg_mcp.campaign.preflight import gpu_problem

    proc = jg("campaign", "eval/campaigns/example.yaml", "--out", tmp_path / "runs", "--dry-run")
    runs = [w.rsplit("__", 1)[0] for w in proc.stdout.split()[1::2]]
    assert len(runs) == 2 * 2 * 4 * 3 and len(set(runs)) == len(runs)
    assert "claude-sonnet__gemm_fp8__workflow__s2" in runs and "my-agent__fused_add_rmsnorm__eval-tool__s0" in runs
    assert "agent my-agent: no executable 'my-agent' on PATH" in proc.stderr
    assert proc.returncode == 1
    if gpu_problem(0) is not None:
        assert "GPU: no GPU 0 on this machine" in proc.stderr
        ran = jg("campaign", "eval/campaigns/example.yaml", "--out", tmp_path / "runs", timeout=600)
        assert ran.returncode == 1
        assert "campaign done: 0/48 runs finished" in ran.stderr, ran.stderr
        assert "24 failed to start: agent could not start: no executable 'my-agent' on PATH" in ran.stderr
        assert "24 failed to start: agent could not start: no GPU 0 on this machine" in ran.stderr
        assert "48/48" not in ran.stderr and "on GPU" not in ran.stderr


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
    record = load_run(run_dir(tmp_path, "mine__axpy__goal-only__s0"))
    assert record.agent == "mine" and record.eval.status == "accepted" and record.audit_ok
    assert record.launch.argv[:3] == [sys.executable, "-m", "jg_mcp.campaign.scripted_agent"]
    empty = jg("table", tmp_path / "nothing-here")
    assert empty.returncode == 2 and "is not a directory" in empty.stderr
