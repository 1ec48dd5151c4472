"""`jg-mcp campaign --executor ray`: a run as a Ray task on a local Ray instance (CPU), and the one-line
error when Ray is not installed."""

from __future__ import annotations

import sys

import pytest

from jg_mcp.campaign.executors import Progress, run_ray
from jg_mcp.campaign.run_record import load_run
from jg_mcp.errors import JgError
from tests.support import DEMO_GOAL, jg


def test_without_ray_the_ray_executor_fails_with_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(JgError, match=r"^--executor ray needs Ray: pip install"):
        run_ray([], tmp_path, None, False, Progress(0))


@pytest.mark.slow
def test_a_campaign_runs_as_ray_tasks_on_a_local_instance(tmp_path):
    pytest.importorskip("ray")
    campaign = tmp_path / "c.yaml"
    campaign.write_text(
        f"agents: [{{adapter: scripted}}]\ngoals: [{DEMO_GOAL}]\nbudget: {{wall_clock_minutes: 2}}\n"
        "eval_args: [--domain-shapes, '0']\n"
    )
    proc = jg(
        "campaign",
        str(campaign),
        "--out",
        str(tmp_path / "runs"),
        "--executor",
        "ray",
        "--ray-address",
        "local",
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    [run_dir] = (tmp_path / "runs").glob("scripted__axpy__goal-only__s0__*/")
    assert f"{run_dir.name}: submitted" in proc.stderr
    record = load_run(run_dir)
    assert record.eval.status == "accepted", record
