"""What a run is and what it leaves: RunSpec (how a run is asked for), RunIdentity (everything that defines it,
hashed into its id), RunRecord (run.json: what ran, under what, how it ended, the verdicts) with its EvalSummary,
and reading run.json back.

A run that never reached the jg server (no executable, no such GPU, an agent that exited or was stopped before its
first request) is `failed to start`: recorded, never counted as a result, rerun by `campaign --retry-failed`.

jg_mcp.campaign.run executes a run and writes its record.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError

import jg_mcp
from jg_mcp.campaign import Launch
from jg_mcp.campaign.agent_account import AgentAccount
from jg_mcp.campaign.budget import Budget
from jg_mcp.models import Strict

RUN_FILE = "run.json"
SHOWN_REASON_CHARS = 200
"""How much of a run's exit reason a command's one-line summary of the run shows."""
FAILED_TO_START: Literal["failed to start"] = "failed to start"
NO_VERDICT: Literal["no verdict"] = "no verdict"
"""The agent's session ran but the run reached no verdict: its eval failed or timed out, or the run was killed or
crashed before it. The harness's or the host's failure, never the agent's: not a result, and run again."""


class RunSpec(Strict):
    """How a run is asked for; what defines it (its RunIdentity) is derived from this, the goal and the agent."""

    agent: str
    """Agent adapter: claude-code, command (with agent_cmd), scripted[-idle|-overrun|-stall]."""
    label: str | None = None
    """The agent's name in run ids and tables (a campaign's label); default: the adapter's name."""
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


class RunIdentity(Strict):
    """Everything that defines a run: another value of any field is another run, with another id.

    Every RunSpec field that can change a result is here. Left out: `label` (it is `agent`), `agent_executable`
    (where the agent's CLI is: what it is, is `agent_version`), `gpu` (which card of the host: the eval records the
    device) and `eval_timeout_s` (an eval cut short reaches no verdict, which is never reused). The fields added
    after the first version are None in older records, so such a record matches no new identity."""

    agent: str
    """The agent's label (the adapter, or the campaign's label for it)."""
    adapter: str
    """The adapter: claude-code, command, scripted[-...]."""
    agent_cmd: str | None = None
    """The command template, for a command agent."""
    agent_version: str
    """What the agent reports for itself before the run (Claude Code's `--version`), or what it is (a command
    agent: the sha256 of its executable)."""
    model: str | None
    """The model asked for; None: the agent's default (the one it names is recorded in RunRecord.model)."""
    condition: str
    """Named condition."""
    goal: str
    """Goal name."""
    goal_sha256: str
    """Hash of the goal's YAML and module."""
    budget: Budget
    """The budget the server enforces."""
    seed: int
    """Replicate index."""
    jg_mcp_version: str = jg_mcp.__version__
    """jg-mcp version."""
    jg_mcp_sha256: str | None = None
    """Hash of jg-mcp's own files (`package_sha256`): what decides the result on jg-mcp's side (the prompt, the
    server, the eval, the audit) changes from one checkout to the next under the same version string."""
    eval_args: list[str] | None = None
    """Extra arguments for `jg-mcp eval` (its policy, its shapes)."""
    sandbox: str | None = None
    """The server's sandbox mode, as asked (auto, bwrap, none)."""
    startup_s: float | None = None
    """The agent's start allowance: part of the hard deadline it is stopped at, so it bounds a slow starter's time."""
    grace_s: float | None = None
    """Seconds past the budget before the agent is stopped: part of the same hard deadline."""

    def key(self) -> str:
        """Ten hex digits of the sha256 of the identity's canonical JSON."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:10]

    def differences(self, other: RunIdentity) -> list[str]:
        """The names of the fields whose values differ from `other`'s."""
        mine, theirs = self.model_dump(), other.model_dump()
        return [name for name in mine if mine[name] != theirs[name]]

    def run_id(self) -> str:
        """AGENT__GOAL__CONDITION__sSEED__KEY: readable, and distinct for every identity."""
        return re.sub(
            r"[^A-Za-z0-9_.-]", "_", f"{self.agent}__{self.goal}__{self.condition}__s{self.seed}__{self.key()}"
        )


@cache
def package_sha256() -> str:
    """Hash of every file of the jg_mcp package but its bytecode (its sources, the goal text's and the knowledge
    condition's files, the demo goal), each with its path. Read once per process: a campaign plans all its runs
    with it."""
    root = Path(jg_mcp.__file__).resolve().parent
    files = sorted(
        (p.relative_to(root).as_posix(), p)
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.relative_to(root).parts
    )
    digest = hashlib.sha256()
    for name, path in files:
        data = path.read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()


class ShapeSummary(Strict):
    """One timed shape of an eval report."""

    name: str
    """Shape label."""
    speedup: float | None = None
    """Speedup against the strongest baseline (the smallest of the shape's speedups)."""
    roofline_pct: float | None = None
    """The candidate's % of the shape's physical floor (speed-of-light)."""


class EvalSummary(Strict):
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
    shapes: list[ShapeSummary] = []
    """Per timed shape: the speedup against the strongest baseline and the % of speed-of-light."""


class RunRecord(Strict):
    """run.json: what ran, under what, how it ended, and the verdicts."""

    run_id: str
    """AGENT__GOAL__CONDITION__sSEED__KEY (RunIdentity.run_id), or the id the run was given."""
    spec: RunSpec
    """The run's specification as given."""
    identity: RunIdentity | None = None
    """Everything that defines the run (None in records of older versions)."""
    status: Literal["finished", "failed to start", "no verdict"] = "finished"
    """`failed to start`: the agent never reached the jg server; `no verdict` (NO_VERDICT): the session ran but
    nothing judged it. Neither is a result: a campaign runs both again."""
    label: str | None = None
    """The agent's label in tables (the campaign's), else the adapter name."""
    agent: str
    """Agent adapter name."""
    agent_version: str = "unknown"
    """What the agent reports for itself."""
    model: str | None = None
    """The model asked for, else the one the agent's own account names."""
    agent_account: AgentAccount | None = None
    """The agent's own account of its tools, model, version and configuration (None: it gave none)."""
    agent_kept: str = ""
    """What of the agent's own set-up the adapter cannot switch off."""
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
    """Requests outside what the condition serves, and what the agent had that it does not allow."""
    jg_mcp_version: str = jg_mcp.__version__
    """jg-mcp version."""
    host: dict[str, str] = {}
    """Host of the runner."""


def is_finished(run_dir: Path) -> bool:
    """The run left a run.json (a failed start included)."""
    return (run_dir / RUN_FILE).is_file()


def load_run(run_dir: Path) -> RunRecord:
    return RunRecord.model_validate_json((run_dir / RUN_FILE).read_text())


Model = TypeVar("Model", bound=BaseModel)


def read_model(path: Path, model: type[Model], most: int, what: str) -> Model | str | None:
    """The file at `path` as `model`, None when there is none, or why it cannot be read: over `most` bytes (never
    read whole), unreadable, or not `what` (a model that does not validate)."""
    try:
        with path.open("rb") as f:
            data = f.read(most + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if len(data) > most:
        return f"{path}: over {most} bytes, not read"
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        return f"{path}: not {what} ({exc.error_count()} problems)"
