"""Campaigns: run real agents on goals under named conditions, many at once, and tabulate the results.

One run = one agent process pointed (through an MCP config naming only the jg server) at one goal under one
condition with one budget; it leaves runs/RUN_ID/ with the workspace, the transcript, the agent's own log,
the eval report, the audit and run.json. A campaign expands a YAML file into runs and executes them one per
GPU (or CPU slot) at a time, resumably. `jg-mcp table` turns a runs directory into the paper's table.

Modules: conditions (what each named condition serves, and the check that a transcript kept to it),
budget (the server-side budget middleware), serving (serve's flags), agents (the adapters),
scripted_agent (the deterministic agent process), run (one run end to end), run_record (what a run is and what it
leaves: run.json), supervise (the agent process:
watched, stopped), campaign (the YAML file and its expansion), executors (local slots, Ray), table (the results table).

The interface every agent adapter implements, kept here so it reads first:
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict


class Launch(BaseModel):
    """How an agent process is started: recorded verbatim in run.json."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    argv: list[str]
    """The exact command line."""
    env: dict[str, str] = {}
    """Environment variables set on top of the runner's (never credentials: those are inherited, unrecorded)."""
    cwd: str
    """Working directory of the agent process."""
    files: dict[str, str] = {}
    """Configuration files written for the agent (path -> content), e.g. its MCP config."""
    stdin_file: str | None = None
    """A file fed to the agent on stdin (the prompt, for agents that read it there); None: /dev/null."""


class RunInputs(BaseModel):
    """What an adapter gets to build its launch."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
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
    `diagnose` turns the agent's own log and stderr into a one-line reason when it failed (no credentials,
    unknown model, ...), or None."""

    name: str

    def version(self) -> str: ...

    def launch(self, inputs: RunInputs) -> Launch: ...

    def diagnose(self, log_text: str, stderr_text: str) -> str | None: ...
