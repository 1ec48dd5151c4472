"""The scripted agent solves every goal with that goal's known-good solution (eval/solutions/GOAL/), so runs and
campaigns can cover all ten goals; on a machine without a GPU the eval checks them in the Triton interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest

from jg_mcp.campaign.run_record import RUN_FILE, load_run
from jg_mcp.campaign.scripted_agent import SOLUTIONS, known_good
from tests.support import REPO, jg

GOALS = sorted(p.stem for p in (REPO / "goals").glob("*.yaml"))
CAMPAIGNED = ["gemm_fp8", "softmax", "swiglu"]
"""The goals of the scripted campaign: three of the ten, each of another kind (a GEMM, a reduction, an elementwise
op). Every known-good solution is accepted by its eval in tests/eval/test_known_good.py; a campaign over all ten
evaluated each of them again, two minutes of a 2-core machine."""


def test_every_goal_has_a_known_good_solution_the_scripted_agent_writes():
    assert len(GOALS) == 10
    for goal in GOALS:
        files = known_good(goal)
        expected = {str(f.relative_to(SOLUTIONS / goal)) for f in (SOLUTIONS / goal).rglob("*") if f.is_file()}
        assert "solution.py" in files and set(files) == expected, goal
        assert files["solution.py"] == (SOLUTIONS / goal / "solution.py").read_text()
    assert "def kernel" in known_good("axpy")["solution.py"] and known_good("no_such_goal") == {}


@pytest.mark.slow
def test_a_scripted_campaign_over_goals_of_three_kinds_is_accepted_by_the_eval(tmp_path):
    campaign = tmp_path / "all.yaml"
    campaign.write_text(f"""\
agents: [{{adapter: scripted}}]
goals: [{", ".join(CAMPAIGNED)}]
budget: {{wall_clock_minutes: 5}}
eval_args: [--domain-shapes, "0"]
sandbox: none
cpu_slots: 2
grace_s: 3
""")
    out = tmp_path / "runs"
    done = jg("campaign", campaign, "--out", out, timeout=1500)
    assert done.returncode == 0, done.stderr
    records = [load_run(p.parent) for p in sorted(out.glob(f"*/{RUN_FILE}"))]
    assert sorted(r.goal for r in records) == CAMPAIGNED
    for r in records:
        assert r.eval.status == "accepted", (
            r.run_id,
            r.eval.reasons,
            (out / r.run_id / "eval.log").read_text()[-2000:],
        )
        workspace = Path(out / r.run_id / "workspace")
        assert (workspace / "solution.py").read_text() == known_good(r.goal)["solution.py"]
    assert "campaign done: 3/3 runs finished" in done.stderr
