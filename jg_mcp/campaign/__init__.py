"""Campaigns: run real agents on goals under named conditions, many at once, and tabulate the results.

One run = one agent process pointed (through an MCP config naming only the jg server) at one goal under one
condition with one budget; it leaves runs/RUN_ID/ with the workspace, the transcript, the agent's own log,
the eval report, the audit and run.json. A campaign expands a YAML file into runs and executes them one per
GPU (or CPU slot) at a time, resumably. `jg-mcp table` turns a runs directory into the paper's table.

Modules: agent_account (what the agent says it had, checked against the condition), conditions (what each
named condition serves, and the check that a transcript kept to it), budget (the server-side budget middleware),
serving (serve's flags), agents (the adapters), scripted_agent (the deterministic agent process), preflight (the
executable and GPU a run needs, checked before it starts), run (one run end to end), run_record (what a run is and
what it leaves: run.json), supervise (the agent process: watched, stopped), campaign (the YAML file and its
expansion), executors (local slots, Ray), marks (a person's verdict on a run), table (the results table).

The interface every agent adapter implements, kept here so it reads first:
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from jg_mcp.models import Strict

if TYPE_CHECKING:
    from jg_mcp.campaign.agent_account import AgentAccount

REASON_CHARS = 300
"""How much of the last line of an agent's or a run's log a failure reason quotes."""


class Launch(Strict):
    """How an agent process is started: recorded verbatim in run.json."""

    argv: list[str]
    """The exact command line."""
    env: dict[str, str] = {}
    """Environment variables set on top of the runner's (never credentials: those are inherited, unrecorded)."""
    withheld: list[str] = []
    """The names of the runner's environment variables not passed to the agent (the operator's own settings of it,
    which would make the run another condition): recorded by name, never by value."""
    cwd: str
    """Working directory of the agent process."""
    files: dict[str, str] = {}
    """Configuration files written for the agent (path -> content), e.g. its MCP config."""
    stdin_file: str | None = None
    """A file fed to the agent on stdin (the prompt, for agents that read it there); None: /dev/null."""
    dirs: list[str] = []
    """Directories made empty for the agent before it starts (its own home and configuration)."""


class RunInputs(Strict):
    """What an adapter gets to build its launch."""

    run_dir: Path
    """runs/RUN_ID: the adapter may write its configuration files here."""
    mcp_config: Path
    """A JSON file `{"mcpServers": {"jg": {"command": ..., "args": [...]}}}` naming only the jg server."""
    server_argv: list[str]
    """The jg server's command line (the same as in mcp_config)."""
    prompt_file: Path
    """The instruction: the goal, plus the condition's addendum."""
    model: str | None = None
    """The model the agent should use, if it takes one."""
    seed: int = 0
    """The run's replicate index."""


class Agent(Protocol):
    """An agent adapter. `launch` returns how to start the agent; `version` what it reports for itself;
    `missing` why its executable cannot be run (None: it can); `account` the agent's own account of its tools,
    model and configuration from its log (jg_mcp.campaign.agent_account), None when it gives none; `kept` what of
    its own set-up the adapter cannot switch off; `diagnose` turns the agent's own log and stderr into a one-line
    reason when it failed (no credentials, unknown model, ...), or None."""

    name: str
    kept: str

    def version(self) -> str: ...

    def missing(self) -> str | None: ...

    def account(self, log_text: str) -> AgentAccount | None: ...

    def launch(self, inputs: RunInputs) -> Launch: ...

    def diagnose(self, log_text: str, stderr_text: str) -> str | None: ...
