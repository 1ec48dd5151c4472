"""Campaign and run output directories are checked like serve's: the default runs directory of a campaign too, and
each run's own directory, before anything is read from or written there."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import DEMO_GOAL, jg

pytestmark = pytest.mark.slow


def test_a_campaigns_default_runs_directory_through_another_users_link_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "runs")
    os.lchown(tmp_path / "runs", 65534, 65534)
    campaign = tmp_path / "c.yaml"
    campaign.write_text(f"agents: [{{adapter: scripted}}]\ngoals: [{DEMO_GOAL}]\n")
    done = subprocess.run(
        [sys.executable, "-m", "jg_mcp", "campaign", "c.yaml", "--dry-run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "belongs to uid 65534" in done.stderr and not list((tmp_path / "elsewhere").iterdir())


def test_a_run_directory_planted_as_a_link_is_refused_not_followed(tmp_path):
    from jg_mcp.campaign.plan import Plan
    from jg_mcp.campaign.run_record import RunSpec

    out = tmp_path / "runs"
    out.mkdir(mode=0o700)
    (tmp_path / "elsewhere").mkdir()
    run_id = Plan.resolve(RunSpec(agent="scripted-idle", goal=str(DEMO_GOAL))).run_id
    os.symlink(tmp_path / "elsewhere", out / run_id)
    done = jg("run", "--agent", "scripted-idle", "--goal", DEMO_GOAL, "--out", out, timeout=120)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "is a symbolic link" in done.stderr and not list((tmp_path / "elsewhere").iterdir())
