"""What `jg-mcp serve` is asked to do, as one model built once from its command line (`from_args`): the sessions it
makes, the transport it serves them on and the condition and budget it applies. Nothing past the CLI's edge reads
the `argparse.Namespace`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal

from pydantic import Field

from jg_mcp.campaign.budget import Budget
from jg_mcp.errors import UsageError
from jg_mcp.live.sandbox import SandboxLimits
from jg_mcp.models import Strict

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


class HttpConfig(Strict):
    """Where and to whom the HTTP transport serves, and how many sessions and connections it holds."""

    host: str = DEFAULT_HOST
    """The bind address; one that is not loopback needs `token_file`."""
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    """The port (0: one the system picks)."""
    token_file: Path | None = None
    """The bearer tokens, one a line, each its holder's; None: one fresh token, printed to stderr."""
    allowed_hosts: list[str] = []
    """Host names clients use to reach a non-loopback bind, accepted in Host and Origin."""
    max_sessions: int = Field(default=32, ge=1)
    """Sessions served at once; a client asking for another gets 503."""
    first_call_s: float = Field(default=120, gt=0)
    """Seconds a session may go without its first tool call before it is ended."""
    idle_s: float = Field(default=900, gt=0)
    """Seconds a session may go without a request in flight before it is ended."""
    max_connections: int = Field(default=256, ge=1)
    """Open connections; past it an idle one closes."""
    session_calls: int = Field(default=4, ge=1)
    """Tool calls in flight one session may hold."""
    session_connections: int = Field(default=6, ge=1)
    """Connections one session may hold."""
    token_sessions: int | None = Field(default=None, ge=1)
    """Sessions one token holder may hold; None: `max_sessions` divided among the tokens."""


class ServeConfig(Strict):
    """One `jg-mcp serve`: the goal, where sessions live and are recorded, how commands are sandboxed, the
    transport, and the condition and budget every session is served under."""

    goal: str
    """The goal's name (gemm_fp8) or the path to its YAML."""
    workspace: Path | None = None
    """The one session's workspace (stdio only); None: runs/RUN_ID/workspace."""
    transcripts: Path = Path("transcripts")
    """Where each session's RUN_ID.jsonl goes."""
    runs: Path = Path("runs")
    """The parent of per-run workspaces."""
    transport: Literal["stdio", "http"] = "stdio"
    """stdio: one client, the process that started the server; http: one session per client connection."""
    http: HttpConfig = HttpConfig()
    """The HTTP transport's settings (unused over stdio)."""
    sandbox: Literal["auto", "bwrap", "none"] = "auto"
    """How commands are isolated (jg_mcp.live.sandbox_probe.choose)."""
    seccomp: bool = True
    """Whether sandboxed commands run under the seccomp filter."""
    hide: list[Path] = []
    """More directories the sandbox hides from commands."""
    limits: SandboxLimits = SandboxLimits()
    """The sandbox's limits on processes, files, tmpfs and the workspace."""
    unbounded_workspace: bool = False
    """Keep sandboxed workspaces on the host's file system, bounded by nothing while commands run."""
    transcript_key_file: Path | None = None
    """A file holding the key every transcript event is MACed with; None: unkeyed."""
    condition: str = "goal-only"
    """The named condition (jg_mcp.record.conditions), recorded in the transcript header."""
    budget: Budget = Budget()
    """The session budget the server enforces (none by default)."""


def from_args(args: argparse.Namespace) -> ServeConfig:
    """The config `jg-mcp serve`'s parsed command line asks for; UsageError for options that do not go together."""
    if args.transport == "stdio" and (args.host is not None or args.port is not None):
        raise UsageError(
            "--host and --port apply to --transport http only; stdio serves the process that started this one"
        )
    return ServeConfig(
        goal=args.goal,
        workspace=args.workspace,
        transcripts=args.transcripts,
        runs=args.runs,
        transport=args.transport,
        http=HttpConfig(
            host=args.host or DEFAULT_HOST,
            port=DEFAULT_PORT if args.port is None else args.port,
            token_file=args.token_file,
            allowed_hosts=args.allow_host,
            max_sessions=args.max_sessions,
            first_call_s=args.first_call_timeout,
            idle_s=args.idle_timeout,
            max_connections=args.max_connections,
            session_calls=args.max_session_calls,
            session_connections=args.max_session_connections,
            token_sessions=args.max_token_sessions,
        ),
        sandbox=args.sandbox,
        seccomp=not args.no_seccomp,
        hide=args.hide,
        limits=SandboxLimits(
            max_processes=args.max_processes,
            max_file_bytes=args.max_file_bytes,
            max_tmp_bytes=args.max_tmp_bytes,
            max_workspace_bytes=args.max_workspace_bytes,
        ),
        unbounded_workspace=args.unbounded_workspace,
        transcript_key_file=args.transcript_key_file,
        condition=args.condition,
        budget=Budget(
            wall_clock_minutes=args.budget_minutes,
            max_tool_calls=args.max_tool_calls,
            max_command_seconds=args.max_command_seconds,
        ),
    )
