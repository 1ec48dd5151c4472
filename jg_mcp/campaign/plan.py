"""What a run is before anything runs: its spec resolved to a goal, an agent, a budget and the identity that names
it (`Plan`), and whether a run already in its directory answers it (`reusable`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from jg_mcp.campaign import Agent
from jg_mcp.campaign.agents import make_agent
from jg_mcp.campaign.budget import Budget
from jg_mcp.campaign.run_record import RunIdentity, RunRecord, RunSpec, is_finished, load_run, package_sha256
from jg_mcp.errors import UsageError
from jg_mcp.record.conditions import NAMES

if TYPE_CHECKING:
    from jg_mcp.goals import LoadedGoal


@dataclass(frozen=True)
class Plan:
    """What a spec resolves to before anything runs: the goal, the agent, the budget, the identity and the id.
    `resolve` loads the goal and asks the agent its version; the constructor only holds them."""

    loaded: LoadedGoal
    agent: Agent
    minutes: float
    """The wall-clock budget: the spec's, else the goal's."""
    budget: Budget
    identity: RunIdentity
    run_id: str

    @classmethod
    def resolve(
        cls, spec: RunSpec, run_id: str | None = None, loaded: LoadedGoal | None = None, import_module: bool = True
    ) -> Plan:
        """The plan of `spec` (its goal `loaded` already, when given); `run_id` overrides the identity's. Without
        `import_module` the goal's module is checked without running it (the run itself never calls it: its eval
        is a process of its own), for a caller that imported it already."""
        from jg_mcp.goals import find_goal, load_goal

        if spec.condition not in NAMES:
            raise UsageError(f"unknown condition '{spec.condition}' (one of {', '.join(NAMES)})")
        loaded = loaded or load_goal(find_goal(spec.goal), import_module=import_module)
        agent = make_agent(spec.agent, spec.model, spec.agent_cmd, spec.agent_executable)
        minutes = spec.budget_minutes or loaded.goal.budget.wall_clock_minutes
        budget = Budget(
            wall_clock_minutes=minutes,
            max_tool_calls=spec.max_tool_calls,
            max_command_seconds=spec.max_command_seconds,
        )
        identity = RunIdentity(
            agent=spec.label or agent.name,
            adapter=spec.agent,
            agent_cmd=spec.agent_cmd,
            agent_version=agent.version(),
            model=spec.model,
            condition=spec.condition,
            goal=loaded.name,
            goal_sha256=loaded.sha256(),
            budget=budget,
            seed=spec.seed,
            jg_mcp_sha256=package_sha256(),
            eval_args=spec.eval_args,
            sandbox=spec.sandbox,
            startup_s=spec.startup_s,
            grace_s=spec.grace_s,
        )
        return cls(loaded, agent, minutes, budget, identity, run_id or identity.run_id())


def reusable(run_dir: Path, identity: RunIdentity) -> RunRecord | None:
    """The run in `run_dir` to reuse: one with a result, made under `identity`; None when it has no result (it is
    run again). A result made under another identity (a --run-id given again under other conditions, or a record
    that predates some of the identity's fields) is refused: reusing it would answer this run with another's
    result, and running over it would lose that one."""
    if not is_finished(run_dir):
        return None
    before = load_run(run_dir)
    if before.status != "finished":
        return None
    differ = identity.differences(before.identity) if before.identity else ["identity (none recorded)"]
    if differ:
        raise UsageError(
            f"{run_dir} holds a finished run made under other conditions (differing: {', '.join(differ)}): give "
            "another --run-id, or remove its directory to run it again"
        )
    return before
