"""A run is a result only when something judged it: a run whose eval reached no verdict is the harness's failure,
run again on request, and a kernel accepted by an eval whose audit failed is not an accepted run."""

from __future__ import annotations

import os
import sys

import pytest

from jg_mcp.campaign.run_record import NO_VERDICT, RUN_FILE, load_run
from tests.support import jg

pytestmark = pytest.mark.slow


def test_a_run_whose_eval_reached_no_verdict_is_not_finished_and_retry_failed_runs_it_again(tmp_path):
    campaign = tmp_path / "c.yaml"
    campaign.write_text("agents: [{adapter: scripted}]\ngoals: [axpy]\nsandbox: none\neval_args: [--shapes, smokee]\n")
    out = tmp_path / "runs"
    first = jg("campaign", campaign, "--out", out, timeout=300)
    [run_dir] = [p.parent for p in out.glob(f"*/{RUN_FILE}")]
    record = load_run(run_dir)
    assert first.returncode == 1 and record.status == NO_VERDICT and record.eval.status == "error", first.stderr
    assert "0/1 runs finished" in first.stderr and "no verdict" in first.stderr

    again = jg("campaign", campaign, "--out", out, "--retry-failed", timeout=300)
    assert "1 failed to start or reached no verdict, 1 to run" in again.stderr, again.stderr
    assert load_run(run_dir).started_at != record.started_at


def test_an_accepted_kernel_whose_audit_failed_is_no_accepted_run(tmp_path):
    """The agent works through the jg server, then edits its solution outside it: the eval judges a kernel the
    transcript never saw."""
    agent = tmp_path / "sneaky.sh"
    agent.write_text(
        f'#!/bin/bash\n"{sys.executable}" -m jg_mcp.campaign.scripted_agent --mcp-config "$1" --prompt-file "$2" '
        "|| exit $?\nprintf '\\n# edited outside the transcript\\n' >> \"$3/solution.py\"\n"
    )
    agent.chmod(0o755)
    template = f"{agent} {{mcp_config}} {{prompt_file}} {{workspace}}"
    out = tmp_path / "runs"
    done = jg(
        "run",
        "--agent",
        "command",
        "--agent-cmd",
        template,
        "--goal",
        "axpy",
        "--sandbox",
        "none",
        "--out",
        out,
        "--eval-arg=--shapes",
        "--eval-arg=smoke",
        timeout=300,
    )
    [run_dir] = [p.parent for p in out.glob(f"*/{RUN_FILE}")]
    record = load_run(run_dir)
    assert record.eval.status == "accepted" and record.audit_ok is False, done.stdout
    assert done.returncode == 1 and "audit FAILED" in done.stdout


def test_a_second_campaign_into_a_runs_directory_in_use_is_refused_in_one_line(tmp_path):
    """Two campaigns into one directory would run the same runs at once, each removing the other's run directories."""
    from jg_mcp.commands.campaign import hold

    campaign = tmp_path / "c.yaml"
    campaign.write_text("agents: [{adapter: scripted}]\ngoals: [axpy]\nsandbox: none\n")
    out = tmp_path / "runs"
    held = hold(out)
    try:
        done = jg("campaign", campaign, "--out", out, timeout=120)
    finally:
        os.close(held)
    assert done.returncode == 2 and f"another campaign is running into {out}" in done.stderr, done.stderr
    assert not list(out.glob(f"*/{RUN_FILE}"))


def test_a_campaign_lock_planted_as_a_link_refuses_the_campaign(tmp_path):
    """A link at the lock's place (planted by whoever can write the runs directory) is never followed: no campaign
    runs without holding its own lock."""
    campaign = tmp_path / "c.yaml"
    campaign.write_text("agents: [{adapter: scripted}]\ngoals: [axpy]\nsandbox: none\n")
    out = tmp_path / "runs"
    out.mkdir(mode=0o700)
    (out / ".campaign.lock").symlink_to(tmp_path / "elsewhere")
    done = jg("campaign", campaign, "--out", out, timeout=120)
    assert done.returncode != 0 and "cannot take the campaign lock" in done.stderr, done.stderr
    assert not (tmp_path / "elsewhere").exists() and not list(out.glob(f"*/{RUN_FILE}"))
