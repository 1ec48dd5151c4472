"""What a run is and what it leaves: RunSpec (everything that defines a run), RunRecord (run.json: what ran,
under what, how it ended, the verdicts) with its EvalSummary, the run's id, and reading run.json back.

jg_mcp.campaign.run executes a run and writes its record.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

import jg_mcp
from jg_mcp.campaign import Launch
from jg_mcp.campaign.budget import Budget

RUN_FILE = "run.json"


class RunSpec(BaseModel):
    """Everything that defines a run; its id is derived from agent, goal, condition and seed."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    agent: str
    """Agent adapter: claude-code, command (with agent_cmd), scripted[-idle|-overrun|-stall]."""
    goal: str
    """Goal name or YAML path."""
    condition: str = "goal-only"
    """Named condition (goal-only, eval-tool, knowledge, workflow)."""
    seed: int = 0
    """Replicate index: part of the run id; passed to command templates as {seed}."""
    budget_minutes: float | None = Field(default=None, gt=0)
    """Wall-clock budget from the first request; default: the goal's."""
    max_tool_calls: int | None = Field(default=None, ge=1)
    """Optional cap on tool calls."""
    max_command_seconds: float | None = Field(default=None, gt=0)
    """Optional cap on seconds spent in run_command."""
    model: str | None = None
    """The model, for agents that take one."""
    agent_cmd: str | None = None
    """Command template for the `command` agent."""
    agent_executable: str | None = None
    """Path of the agent's executable, when not on PATH (claude-code)."""
    gpu: int | None = None
    """GPU index (CUDA_VISIBLE_DEVICES for the agent, the server and the eval); None: leave it as it is."""
    startup_s: float = 120.0
    """Allowance for the agent to start before the budget's clock can start."""
    grace_s: float = 10.0
    """Seconds between SIGTERM and SIGKILL when the agent is stopped, and past the budget before it is."""
    eval_args: list[str] = []
    """Extra arguments for `jg-mcp eval` (e.g. --shapes smoke on a CPU-only machine)."""
    eval_timeout_s: float = 3600.0
    """Seconds the eval may take."""
    sandbox: str = "auto"
    """Sandbox mode passed to the server (auto, bwrap, none)."""


class EvalSummary(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    status: str
    """accepted, rejected, no solution, or error."""
    exit_code: int | None = None
    """`jg-mcp eval`'s exit status (0 accepted, 1 rejected)."""
    reasons: list[str] = []
    """Why it was rejected (the eval's reason codes, or why there was no eval)."""
    geomean_speedup: float | None = None
    """Geometric mean over timed shapes of the speedup against the strongest baseline."""
    roofline_pct: float | None = None
    """Median over timed shapes of the candidate's % of roofline."""
    device: str | None = None
    """Where the eval ran."""


class RunRecord(BaseModel):
    """run.json: what ran, under what, how it ended, and the verdicts."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    run_id: str
    """agent__goal__condition__sSEED."""
    spec: RunSpec
    """The run's specification as given."""
    agent: str
    """Agent adapter name."""
    agent_version: str = "unknown"
    """What the agent reports for itself."""
    model: str | None = None
    """Model asked for."""
    condition: str
    """Named condition."""
    goal: str
    """Goal name."""
    goal_sha256: str
    """Hash of the goal's YAML and module."""
    budget: Budget
    """The budget the server enforced."""
    gpu: str | None = None
    """CUDA_VISIBLE_DEVICES the run had (None: inherited, unset)."""
    server_argv: list[str]
    """The jg server's command line, as in mcp.json."""
    launch: Launch | None = None
    """The agent's exact command line, environment additions, cwd and configuration files."""
    started_at: str
    """UTC start."""
    ended_at: str = ""
    """UTC end (after eval and audit)."""
    agent_wall_s: float = 0.0
    """Seconds from the agent's start to its end."""
    eval_s: float = 0.0
    """Seconds the eval took (0: no eval)."""
    audit_s: float = 0.0
    """Seconds the audit took (0: no audit)."""
    exit_reason: str = ""
    """How the agent's session ended: agent exited, budget spent, run timeout, could not start, ..."""
    agent_exit_code: int | None = None
    """The agent's exit status (negative: the signal that ended it)."""
    transcript: str | None = None
    """The session transcript, relative to the run directory."""
    close_reason: str | None = None
    """The transcript's close reason (None: not closed)."""
    solution: bool = False
    """A solution file was left in the workspace."""
    eval: EvalSummary
    """The eval's verdict."""
    audit_ok: bool | None = None
    """`jg-mcp audit` exit 0 (None: no transcript to audit)."""
    condition_violations: list[str] = []
    """Requests outside what the condition serves."""
    jg_mcp_version: str = jg_mcp.__version__
    """jg-mcp version."""
    host: dict[str, str] = {}
    """Host of the runner."""


def default_run_id(agent: str, goal_name: str, condition: str, seed: int) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{agent}__{goal_name}__{condition}__s{seed}")


def is_finished(run_dir: Path) -> bool:
    return (run_dir / RUN_FILE).is_file()


def load_record(run_dir: Path) -> RunRecord:
    return RunRecord.model_validate_json((run_dir / RUN_FILE).read_text())
