"""The campaign file: agents x goals x conditions x seeds, one budget, the GPUs to spread runs over.

    agents:
      - {adapter: claude-code, model: claude-sonnet-4-5}
      - {adapter: scripted}
    goals: [gemm_fp8, swiglu]
    conditions: [goal-only, eval-tool]
    seeds: [0, 1, 2]
    budget: {wall_clock_minutes: 60}
    gpus: [0, 1, 2, 3]

`expand` turns it into runs with deterministic ids (AGENT__GOAL__CONDITION__sSEED__KEY, the key a hash of all
that defines the run: RunIdentity), so a rerun finds the finished ones (their run.json) and skips them.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import Field, ValidationError, field_validator

from jg_mcp.campaign.plan import Plan
from jg_mcp.campaign.run_record import RunSpec
from jg_mcp.errors import JgError, UsageError
from jg_mcp.models import Strict
from jg_mcp.record.conditions import NAMES
from jg_mcp.schema_errors import first_problem


class AgentSpec(Strict):
    adapter: str
    """claude-code, command, scripted, scripted-idle, scripted-overrun or scripted-stall."""
    label: str | None = None
    """Name in run ids and tables (default: the adapter, plus the model when one is given)."""
    model: str | None = None
    """The model, for agents that take one."""
    agent_cmd: str | None = None
    """Command template, for the `command` adapter."""
    executable: str | None = None
    """The agent's executable when not on PATH."""

    def name(self) -> str:
        return self.label or (f"{self.adapter}-{self.model}" if self.model else self.adapter)


class CampaignBudget(Strict):
    wall_clock_minutes: float | None = Field(default=None, gt=0)
    """Wall-clock minutes per run from its first request (default: each goal's)."""
    max_tool_calls: int | None = Field(default=None, ge=1)
    """Optional cap on tool calls per run."""
    max_command_seconds: float | None = Field(default=None, gt=0)
    """Optional cap on seconds spent in run_command per run."""


class Campaign(Strict):
    agents: list[AgentSpec] = Field(min_length=1)
    """The agents to compare, side by side."""
    goals: list[str] = Field(min_length=1)
    """Goal names or YAML paths (relative paths are taken from the campaign file's directory)."""
    conditions: list[str] = ["goal-only"]
    """Named conditions: goal-only, eval-tool, knowledge, workflow."""
    seeds: list[int] = [0]
    """Replicate indices; each (agent, goal, condition) runs once per seed."""
    budget: CampaignBudget = CampaignBudget()
    """The budget every run gets, enforced by the server."""
    gpus: list[int] = []
    """GPU indices; one run per GPU at a time. Empty: no GPU, `cpu_slots` runs at a time."""
    cpu_slots: int = Field(default=1, ge=1)
    """Concurrent runs when `gpus` is empty."""
    run_timeout_minutes: float | None = Field(default=None, gt=0)
    """Wall-clock cap on a whole run (agent, eval, audit); default: the budget plus 60 minutes."""
    grace_s: float = Field(default=10.0, ge=0)
    """Seconds between SIGTERM and SIGKILL when an agent is stopped."""
    eval_args: list[str] = []
    """Extra arguments for `jg-mcp eval` (e.g. [--shapes, smoke] on a CPU-only machine)."""
    sandbox: str = "auto"
    """The server's sandbox mode: auto, bwrap, none."""

    @field_validator("conditions")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [c for c in value if c not in NAMES]
        if unknown:
            raise ValueError(f"unknown condition(s) {unknown}; known: {list(NAMES)}")
        return value


def load_campaign(path: Path) -> Campaign:
    """Read and validate a campaign file; a malformed one is a JgError of one line naming the field (an unknown
    key first, with the known key it resembles)."""
    try:
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict):
            raise JgError(f"{path}: must be a YAML mapping of campaign fields (agents, goals, ...)")
        campaign = Campaign.model_validate(data)
    except OSError as exc:
        raise UsageError(f"cannot read campaign file {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise JgError(f"{path}: YAML syntax error: {' '.join(str(exc).split())}") from None
    except ValidationError as exc:
        field, problem = first_problem(Campaign, exc)
        raise JgError(f"{path}:{f' field {field!r}' if field else ''} {problem}") from None
    base = path.resolve().parent
    campaign.goals = [
        str(base / g) if g.endswith((".yaml", ".yml")) and not Path(g).is_absolute() else g for g in campaign.goals
    ]
    return campaign


def expand(campaign: Campaign) -> list[tuple[str, RunSpec]]:
    """(run id, spec) for every agent x goal x condition x seed, in that nesting order (seeds innermost)."""
    from jg_mcp.goals import find_goal, load_goal

    loaded = {g: load_goal(find_goal(g)) for g in campaign.goals}
    labels = [a.name() for a in campaign.agents]
    if len(set(labels)) != len(labels):
        raise JgError(f"two agents share a label ({labels}); give them distinct `label`s")
    runs = []
    b = campaign.budget
    for agent in campaign.agents:
        for goal in campaign.goals:
            for condition in campaign.conditions:
                for seed in campaign.seeds:
                    spec = RunSpec(
                        agent=agent.adapter,
                        label=agent.name(),
                        goal=goal,
                        condition=condition,
                        seed=seed,
                        budget_minutes=b.wall_clock_minutes or loaded[goal].goal.budget.wall_clock_minutes,
                        max_tool_calls=b.max_tool_calls,
                        max_command_seconds=b.max_command_seconds,
                        model=agent.model,
                        agent_cmd=agent.agent_cmd,
                        agent_executable=agent.executable,
                        grace_s=campaign.grace_s,
                        eval_args=campaign.eval_args,
                        sandbox=campaign.sandbox,
                    )
                    runs.append((Plan.resolve(spec, loaded=loaded[goal]).run_id, spec))
    return runs


def run_timeout_s(campaign: Campaign, spec: RunSpec) -> float:
    """The cap on one whole run: the campaign's, else startup + budget + grace + an hour for eval and audit."""
    if campaign.run_timeout_minutes is not None:
        return campaign.run_timeout_minutes * 60
    return spec.startup_s + (spec.budget_minutes or 0) * 60 + spec.grace_s + 3600
