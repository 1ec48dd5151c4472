"""Agent adapters (the `Agent` protocol in jg_mcp.campaign): Claude Code headless, a generic command
template, and the deterministic scripted agent.

Each returns a `Launch`: the exact command line, environment additions, working directory and the files
written for it, all recorded in run.json. Credentials are never written or recorded: an agent inherits
them from the environment of `jg-mcp run`.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys

import jg_mcp
from jg_mcp.campaign import Launch, RunInputs
from jg_mcp.errors import UsageError

SCRIPTED_BEHAVIOURS = ("solve", "idle", "overrun", "stall")


def mcp_config(server_argv: list[str]) -> dict:
    """The MCP client configuration naming only the jg server (Claude Code's and most clients' format)."""
    return {"mcpServers": {"jg": {"type": "stdio", "command": server_argv[0], "args": server_argv[1:], "env": {}}}}


def _version_of(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    return (proc.stdout.strip() or proc.stderr.strip()).splitlines()[0] if proc.returncode == 0 else "unknown"


def _last_json_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


class ClaudeCode:
    """Claude Code headless: `claude -p` with only the jg server (`--strict-mcp-config`), built-in tools off
    (`--tools ""`), every jg tool allowed without prompting, settings from the user's only (no project or local
    settings of whatever directory the runs are in), the prompt on stdin and the stream-json events as the
    agent's log."""

    name = "claude-code"

    def __init__(self, executable: str = "claude", model: str | None = None, extra_args: list[str] | None = None):
        self.executable = executable
        self.model = model
        self.extra_args = extra_args or []

    def _exe(self) -> str:
        return shutil.which(self.executable) or self.executable

    def version(self) -> str:
        return _version_of([self._exe(), "--version"])

    def launch(self, inputs: RunInputs) -> Launch:
        argv = [
            self._exe(),
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--mcp-config",
            str(inputs.mcp_config),
            "--strict-mcp-config",
            "--tools",
            "",
            "--allowedTools",
            "mcp__jg",
            "--setting-sources",
            "user",
            "--no-session-persistence",
        ]
        model = inputs.model or self.model
        if model:
            argv += ["--model", model]
        return Launch(
            argv=[*argv, *self.extra_args],
            cwd=str(inputs.run_dir / "agent"),
            files={str(inputs.mcp_config): inputs.mcp_config.read_text()},
            stdin_file=str(inputs.prompt_file),
        )

    def diagnose(self, log_text: str, stderr_text: str) -> str | None:
        events = _last_json_lines(log_text)
        result = next((e for e in reversed(events) if e.get("type") == "result"), None)
        error = next((e["error"] for e in events if e.get("type") == "assistant" and e.get("error")), None)
        if result is not None and result.get("is_error"):
            return f"claude-code: {error + ': ' if error else ''}{result.get('result') or result.get('subtype')}"
        if result is None:
            tail = (stderr_text.strip().splitlines() or ["no result event in its log"])[-1]
            return f"claude-code: {tail[:300]}"
        return None


class CommandTemplate:
    """Any agent CLI, from a template: `{mcp_config}`, `{prompt_file}`, `{prompt}`, `{workspace}`, `{model}`
    and `{run_dir}` are substituted (shell-quoted), then the line is split like a shell would."""

    name = "command"

    def __init__(self, template: str, name: str = "command", version_cmd: str | None = None):
        if "{mcp_config}" not in template:
            raise UsageError("--agent-cmd must pass {mcp_config} to the agent (the only MCP server it may use)")
        self.template = template
        self.name = name
        self.version_cmd = version_cmd

    def version(self) -> str:
        return _version_of(shlex.split(self.version_cmd)) if self.version_cmd else "unknown"

    def launch(self, inputs: RunInputs) -> Launch:
        values = {
            "mcp_config": str(inputs.mcp_config),
            "prompt_file": str(inputs.prompt_file),
            "prompt": inputs.prompt_file.read_text(),
            "workspace": str(inputs.run_dir / "workspace"),
            "model": inputs.model or "",
            "run_dir": str(inputs.run_dir),
            "seed": str(inputs.seed),
        }
        line = self.template.format(**{k: shlex.quote(v) for k, v in values.items()})
        return Launch(
            argv=shlex.split(line),
            cwd=str(inputs.run_dir / "agent"),
            files={str(inputs.mcp_config): inputs.mcp_config.read_text()},
        )

    def diagnose(self, log_text: str, stderr_text: str) -> str | None:
        tail = stderr_text.strip().splitlines()
        return f"{self.name}: {tail[-1][:300]}" if tail else None


class Scripted:
    """The deterministic scripted client as an agent process (jg_mcp.campaign.scripted_agent): `solve` writes
    the demo's axpy solution, `idle` never writes one, `overrun` keeps calling tools past its budget, `stall`
    stops calling anything."""

    def __init__(self, behaviour: str = "solve"):
        if behaviour not in SCRIPTED_BEHAVIOURS:
            raise UsageError(f"unknown scripted behaviour '{behaviour}' (one of {', '.join(SCRIPTED_BEHAVIOURS)})")
        self.behaviour = behaviour
        self.name = "scripted" if behaviour == "solve" else f"scripted-{behaviour}"

    def version(self) -> str:
        return f"jg-mcp {jg_mcp.__version__} scripted"

    def launch(self, inputs: RunInputs) -> Launch:
        argv = [
            sys.executable,
            "-m",
            "jg_mcp.campaign.scripted_agent",
            "--mcp-config",
            str(inputs.mcp_config),
            "--prompt-file",
            str(inputs.prompt_file),
            "--behaviour",
            self.behaviour,
        ]
        return Launch(
            argv=argv, cwd=str(inputs.run_dir / "agent"), files={str(inputs.mcp_config): inputs.mcp_config.read_text()}
        )

    def diagnose(self, log_text: str, stderr_text: str) -> str | None:
        tail = stderr_text.strip().splitlines()
        return f"scripted: {tail[-1][:300]}" if tail else None


def make_agent(name: str, model: str | None = None, agent_cmd: str | None = None, executable: str | None = None):
    """The adapter for an agent name: claude-code, command (with agent_cmd), scripted[-idle|-overrun]."""
    if name == "claude-code":
        return ClaudeCode(executable or "claude", model)
    if name == "command" or agent_cmd:
        if not agent_cmd:
            raise UsageError("agent 'command' needs --agent-cmd TEMPLATE")
        return CommandTemplate(agent_cmd, name=name)
    if name == "scripted" or name.startswith("scripted-"):
        return Scripted(name.removeprefix("scripted").removeprefix("-") or "solve")
    raise UsageError(
        f"unknown agent '{name}': claude-code, command (with --agent-cmd), scripted, scripted-idle, "
        "scripted-overrun, scripted-stall"
    )
