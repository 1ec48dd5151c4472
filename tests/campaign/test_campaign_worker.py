"""A campaign's run worker does not import the goal's module again: the campaign imported it before its first run,
and the run's eval is a process of its own."""

from __future__ import annotations

import subprocess
import sys

from jg_mcp.campaign.run_record import RunSpec

WORKER = """
import sys
import jg_mcp.campaign.run as run

def execute(spec, out, run_id, plan):
    print("torch" in sys.modules, plan.loaded._module is None, plan.run_id)
    sys.exit(0)

run.execute = execute
run.main(sys.argv[1:])
"""


def test_the_worker_plans_its_run_without_importing_the_goal_module_or_torch(tmp_path):
    spec = RunSpec(agent="scripted", goal="axpy", condition="goal-only")
    argv = ["--spec", spec.model_dump_json(), "--out", str(tmp_path), "--run-id", "r1"]
    done = subprocess.run([sys.executable, "-c", WORKER, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "r1"]
