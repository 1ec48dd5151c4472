"""A run is identified by everything that defines it, a finished run is reused out loud, and a campaign's failed
starts are failures: its exit status says so and --retry-failed reruns only them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jg_mcp.campaign.run_record import RUN_FILE, load_run
from tests.support import DEMO_GOAL, jg

pytestmark = pytest.mark.slow


def run_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in out.glob(f"*/{RUN_FILE}"))


def test_another_model_or_budget_is_a_new_run_and_a_reused_run_is_said_in_one_line(tmp_path):
    out = tmp_path / "runs"
    base = ("run", "--agent", "scripted-idle", "--goal", DEMO_GOAL, "--sandbox", "none", "--out", out)
    first = jg(*base, timeout=240)
    [only] = run_dirs(out)
    assert first.returncode == 1 and "reusing" not in first.stdout, first.stderr
    record = load_run(only)
    assert record.status == "finished" and record.eval.status == "no solution"
    assert record.identity.model is None and record.identity.budget.wall_clock_minutes == 10
    text = (only / RUN_FILE).read_text()

    again = jg(*base, timeout=240)
    reuse = [line for line in again.stdout.splitlines() if line.startswith("reusing")]
    assert reuse == [
        f"reusing the finished run {only.name} (its run.json has this run's identity: the same agent and version, "
        "model, condition, goal, budget, seed, eval arguments, sandbox and jg-mcp files); remove its directory to run "
        "it again"
    ], again.stdout
    assert (only / RUN_FILE).read_text() == text and run_dirs(out) == [only]

    other_model = jg(*base, "--model", "another-model", timeout=240)
    other_budget = jg(*base, "--budget-minutes", "3", timeout=240)
    assert "reusing" not in other_model.stdout + other_budget.stdout
    dirs = run_dirs(out)
    assert len(dirs) == 3 and all(d.name.startswith("scripted-idle__axpy__goal-only__s0__") for d in dirs)
    records = {d: load_run(d) for d in dirs}
    assert sorted((r.identity.model or "", r.identity.budget.wall_clock_minutes) for r in records.values()) == [
        ("", 3.0),
        ("", 10.0),
        ("another-model", 10.0),
    ]


def test_a_campaign_with_an_agent_that_cannot_start_exits_non_zero_and_retry_failed_reruns_only_those(tmp_path):
    agent = tmp_path / "bin" / "my-agent"
    credential = tmp_path / "credential"
    campaign = tmp_path / "c.yaml"
    campaign.write_text(f"""\
agents:
  - {{adapter: scripted-idle}}
  - {{adapter: command, label: mine, agent_cmd: "{agent} --mcp-config {{mcp_config}} --prompt-file {{prompt_file}}"}}
goals: [{DEMO_GOAL}]
sandbox: none
grace_s: 1
""")
    out = tmp_path / "runs"
    dry = jg("campaign", campaign, "--out", out, "--dry-run")
    assert dry.returncode == 1 and f"agent mine: no executable file {agent}" in dry.stderr, dry.stderr
    first = jg("campaign", campaign, "--out", out, timeout=300)
    assert first.returncode == 1, first.stderr
    assert f"1 failed to start: agent could not start: no executable file {agent}" in first.stderr
    assert "campaign done: 1/2 runs finished" in first.stderr and "--retry-failed" in first.stderr
    mine, idle = (load_run(d) for d in run_dirs(out))
    assert mine.run_id.startswith("mine__") and idle.run_id.startswith("scripted-idle__")
    assert (idle.status, mine.status) == ("finished", "failed to start")
    idle_text = (out / idle.run_id / RUN_FILE).read_text()

    plain = jg("campaign", campaign, "--out", out, timeout=120)
    assert plain.returncode == 1, plain.stderr
    assert "1 failed to start or reached no verdict, 0 to run" in plain.stderr, plain.stderr

    # The installed CLI is what the agent's runs are now: another version, so another run; it exits before its first
    # request while it has no credential, and once it has one, --retry-failed runs it under the same id.
    agent.parent.mkdir()
    agent.write_text(
        f'#!/bin/sh\n[ -e {credential} ] || {{ echo "no credential" >&2; exit 3; }}\n'
        f'exec {sys.executable} -m jg_mcp.campaign.scripted_agent --behaviour idle "$@"\n'
    )
    agent.chmod(0o755)
    installed = jg("campaign", campaign, "--out", out, timeout=300)
    assert installed.returncode == 1 and "0 failed to start or reached no verdict, 1 to run" in installed.stderr
    [mine_now] = [d for d in run_dirs(out) if d.name.startswith("mine__") and d.name != mine.run_id]
    assert load_run(mine_now).status == "failed to start" and "no credential" in load_run(mine_now).exit_reason

    credential.touch()
    retried = jg("campaign", campaign, "--out", out, "--retry-failed", timeout=300)
    assert retried.returncode == 0, retried.stderr
    assert "1 failed to start or reached no verdict, 1 to run" in retried.stderr
    assert f"{mine_now.name}: started" in retried.stderr and f"{idle.run_id}: started" not in retried.stderr
    assert (out / idle.run_id / RUN_FILE).read_text() == idle_text
    assert load_run(mine_now).status == "finished"
    assert "campaign done: 2/2 runs finished" in retried.stderr
