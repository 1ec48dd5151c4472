"""Another condition is another run: every field of a run's spec that can change its result is in its identity, a
command agent is identified by the executable it starts, jg-mcp by its own files, and a finished run given the same
--run-id under other conditions is refused rather than reused."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jg_mcp.campaign.agents import EXECUTABLE_READ, CommandTemplate
from jg_mcp.campaign.plan import Plan
from jg_mcp.campaign.run_record import RUN_FILE, RunSpec, load_run
from tests.support import DEMO_GOAL, REPO, jg

AGENT_ARGS = "--mcp-config {mcp_config} --prompt-file {prompt_file}"


def write_agent(path: Path, behaviour: str) -> None:
    """A command agent's CLI: a script starting the scripted agent with `behaviour`."""
    path.write_text(
        f'#!/bin/sh\nexec {sys.executable} -m jg_mcp.campaign.scripted_agent --behaviour {behaviour} "$@"\n'
    )
    path.chmod(0o755)


def run_id(spec: RunSpec) -> str:
    return Plan.resolve(spec, import_module=False).run_id


def test_every_spec_field_that_can_change_a_result_changes_the_run_id(tmp_path, axpy_copy):
    agent = tmp_path / "my-agent"
    write_agent(agent, "idle")
    base = RunSpec(agent="command", agent_cmd=f"{agent} {AGENT_ARGS}", goal=str(DEMO_GOAL))
    others = {
        "agent": "scripted-idle",
        "label": "mine",
        "goal": str(axpy_copy),
        "condition": "eval-tool",
        "seed": 1,
        "budget_minutes": 3.0,
        "max_tool_calls": 5,
        "max_command_seconds": 30.0,
        "model": "another-model",
        "agent_cmd": f"{agent} --verbose {AGENT_ARGS}",
        "agent_executable": "/elsewhere/claude",
        "gpu": 1,
        "startup_s": 30.0,
        "grace_s": 1.0,
        "eval_args": ["--policy", "triton", "--shapes", "all"],
        "eval_timeout_s": 60.0,
        "sandbox": "bwrap",
    }
    assert set(others) == set(RunSpec.model_fields), "a new RunSpec field needs a value here: is it in the identity?"
    first = run_id(base)
    same = {name for name, value in others.items() if run_id(base.model_copy(update={name: value})) == first}
    assert same == {"agent_executable", "gpu", "eval_timeout_s"}
    assert run_id(base) == first


def test_a_command_agent_is_identified_by_the_executable_it_starts(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    agent = bin_dir / "mycli"
    write_agent(agent, "idle")
    template = CommandTemplate(f"mycli {AGENT_ARGS}")
    assert template.version() == f"sha256:{hashlib.sha256(agent.read_bytes()).hexdigest()}"
    spec = RunSpec(agent="command", agent_cmd=f"mycli {AGENT_ARGS}", goal=str(DEMO_GOAL))
    before = run_id(spec)

    write_agent(agent, "solve")  # the CLI upgraded in place: the same name, the same template
    assert run_id(spec) != before

    (bin_dir / "mycli-2").symlink_to(agent)  # found through a link: the file it names
    assert CommandTemplate(f"mycli-2 {AGENT_ARGS}").version() == template.version()
    assert CommandTemplate(f"no-such-cli {AGENT_ARGS}").version() == "unknown: no executable 'no-such-cli' on PATH"


def test_a_large_executable_is_identified_by_its_size_head_and_tail(tmp_path):
    big = tmp_path / "big-cli"
    big.write_bytes(b"\0" * (EXECUTABLE_READ + 1))
    big.chmod(0o755)
    template = CommandTemplate(f"{big} {AGENT_ARGS}")
    before = template.version()
    assert before.startswith("sha256 of its first and last 8 MiB:")
    assert before.endswith(f"({EXECUTABLE_READ + 1} bytes)")
    with big.open("r+b") as f:
        f.seek(EXECUTABLE_READ)
        f.write(b"\1")
    assert template.version() != before


@pytest.mark.slow
def test_a_checkout_with_other_package_files_gives_another_run_id(tmp_path):
    """Two copies of the package, one telling the agent one more sentence: the same spec, two ids. The same copy at
    another place gives the same id: the digest is of the files, not of where they are."""
    shutil.copytree(REPO / "jg_mcp", tmp_path / "a" / "jg_mcp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    shutil.copytree(tmp_path / "a", tmp_path / "c")
    goal_text = tmp_path / "c" / "jg_mcp" / "goal_text.py"
    goal_text.write_text(goal_text.read_text() + '\nEXTRA = "one more sentence"\n')
    code = (
        "from jg_mcp.campaign.plan import Plan; from jg_mcp.campaign.run_record import RunSpec; "
        f"print(Plan.resolve(RunSpec(agent='scripted-idle', goal={str(DEMO_GOAL)!r}), import_module=False).run_id)"
    )
    ids = [
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONPATH": str(tmp_path / copy), "PATH": "/usr/bin:/bin"},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.strip()
        for copy in "abc"
    ]
    assert ids[0] == ids[1] != ids[2], ids


@pytest.mark.slow
def test_a_run_id_given_again_under_other_conditions_is_refused_and_reuse_is_said_only_when_true(tmp_path):
    out = tmp_path / "runs"
    base = ("run", "--run-id", "exp1", "--agent", "scripted-idle", "--goal", DEMO_GOAL, "--sandbox", "none")
    first = jg(*base, "--grace", "1", "--out", out, timeout=240)
    assert first.returncode == 1 and "reusing" not in first.stdout, first.stderr
    text = (out / "exp1" / RUN_FILE).read_text()

    again = jg(*base, "--grace", "1", "--out", out, timeout=240)
    assert [line for line in again.stdout.splitlines() if line.startswith("reusing the finished run exp1 (")], again
    assert again.returncode == 1

    other = jg(*base, "--grace", "1", "--budget-minutes", "3", "--eval-arg=--shapes", "--eval-arg=smoke", "--out", out)
    assert other.returncode == 2 and "reusing" not in other.stdout, other
    [error] = other.stderr.strip().splitlines()
    assert "exp1 holds a finished run made under other conditions (differing: budget, eval_args)" in error, error
    assert (out / "exp1" / RUN_FILE).read_text() == text

    older = load_run(out / "exp1")
    older.identity = None  # a record written before the identity was
    (out / "exp1" / RUN_FILE).write_text(older.model_dump_json())
    unknown = jg(*base, "--grace", "1", "--out", out)
    assert unknown.returncode == 2 and "(differing: identity (none recorded))" in unknown.stderr, unknown


@pytest.mark.slow
def test_a_campaign_under_other_eval_arguments_or_sandbox_has_its_run_to_do(tmp_path):
    campaign = tmp_path / "c.yaml"
    settings = f"agents: [{{adapter: scripted-idle}}]\ngoals: [{DEMO_GOAL}]\ngrace_s: 1\n"
    campaign.write_text(settings + "sandbox: none\neval_args: [--shapes, smoke]\n")
    out = tmp_path / "runs"
    first = jg("campaign", campaign, "--out", out, timeout=300)
    assert first.returncode == 0, first.stderr

    def counts() -> str:
        dry = jg("campaign", campaign, "--out", out, "--dry-run")
        return dry.stderr.splitlines()[0].split(": ", 1)[1].split("; out")[0]

    assert counts() == "1 runs, 1 finished, 0 failed to start or reached no verdict, 0 to run"
    campaign.write_text(settings + "sandbox: none\neval_args: [--policy, triton, --shapes, smoke]\n")
    assert counts() == "1 runs, 0 finished, 0 failed to start or reached no verdict, 1 to run"
    campaign.write_text(settings + "sandbox: bwrap\neval_args: [--shapes, smoke]\n")
    assert counts() == "1 runs, 0 finished, 0 failed to start or reached no verdict, 1 to run"
