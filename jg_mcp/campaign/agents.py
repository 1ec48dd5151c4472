"""Agent adapters (the `Agent` protocol in jg_mcp.campaign): Claude Code headless, a generic command
template, and the deterministic scripted agent.

Each returns a `Launch`: the exact command line, environment additions, working directory and the files
written for it, all recorded in run.json. Credentials are never written or recorded: an agent inherits
them from the environment of `jg-mcp run`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import jg_mcp
from jg_mcp.campaign import REASON_CHARS, Launch, RunInputs
from jg_mcp.campaign.agent_account import AgentAccount, claude_init, scripted_account
from jg_mcp.errors import UsageError

SCRIPTED_BEHAVIOURS = ("solve", "idle", "overrun", "stall")
CHECKOUT = Path(jg_mcp.__file__).resolve().parent.parent
NODE_BIN = Path(".tools") / "node_modules" / ".bin"
"""Where set-up installs Claude Code's CLI, in the checkout."""
CLAUDE_ENV = {
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
    "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1",
    "CLAUDE_CODE_DISABLE_BUNDLED_SKILLS": "1",
    "MCP_CONNECTION_NONBLOCKING": "0",
    "MCP_CONNECT_TIMEOUT_MS": "120000",
}
"""Off for every run: auto memory, CLAUDE.md discovery (it walks up from the working directory, past the run's
own directory) and the skills bundled with the CLI. And the jg server awaited before the first turn (up to 120 s,
the run's start allowance): by default `-p` waits 5 s for MCP servers and then asks the model without their
tools, which a server that probes its sandbox at start can miss."""
CLAUDE_SETTINGS = (
    "ANTHROPIC_",
    "CLAUDE_",
    "MAX_THINKING_TOKENS",
    "MAX_MCP_OUTPUT_TOKENS",
    "MCP_",
    "BASH_",
    "DISABLE_",
    "USE_BUILTIN_RIPGREP",
    "SLASH_COMMAND_",
    "VERTEX_REGION_",
)
"""Prefixes of the environment variables that configure Claude Code (its model, output and thinking tokens, tool
timeouts, what it turns off): the operator's shell must not choose them for a run, so none reaches the CLI but
CLAUDE_ENV and CLAUDE_ACCESS."""
CLAUDE_ACCESS = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "ANTHROPIC_VERTEX_PROJECT_ID",
    }
)
"""How the CLI reaches the API (credentials, endpoint, cloud provider): passed through, and never recorded."""
COMMAND_KEPT = (
    "a command agent's own configuration (its settings, built-in tools, memory, other MCP servers) is not "
    "controlled by jg-mcp: only the server side of the condition is checked"
)


def mcp_config(server_argv: list[str]) -> dict:
    """The MCP client configuration naming only the jg server (Claude Code's and most clients' format)."""
    return {"mcpServers": {"jg": {"type": "stdio", "command": server_argv[0], "args": server_argv[1:], "env": {}}}}


def _version_of(argv: list[str]) -> str:
    return _version_of_cached(tuple(argv))


@cache
def _version_of_cached(argv: tuple[str, ...]) -> str:
    """Asked once per process: a campaign plans every run of an agent with it."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    return (proc.stdout.strip() or proc.stderr.strip()).splitlines()[0] if proc.returncode == 0 else "unknown"


EXECUTABLE_READ = 16 * 2**20
"""The most of a command agent's executable its version reads: all of a script or of a small binary; of a larger
file its first and last halves of this, with its size (a rebuilt binary changes its headers, ELF's build id)."""


def executable_digest(path: Path) -> str:
    """The file at `path` as a version: `sha256:HEX` of its content (what `sha256sum` prints) when it is at most
    EXECUTABLE_READ bytes, else the sha256 of its head and tail, with its size."""
    found = path.stat()
    return _digest_cached(path, found.st_size, found.st_mtime_ns, found.st_ino)


@cache
def _digest_cached(path: Path, size: int, mtime_ns: int, inode: int) -> str:
    """Read once per process and version of the file (a campaign plans every run of an agent with it); the file's
    size, time and inode are in the key so that a CLI replaced while the process lives is read again."""
    with path.open("rb") as f:
        if size <= EXECUTABLE_READ:
            return f"sha256:{hashlib.sha256(f.read(size)).hexdigest()}"
        half = EXECUTABLE_READ // 2
        digest = hashlib.sha256(f.read(half))
        f.seek(size - half)
        digest.update(f.read(half))
    return f"sha256 of its first and last {half // 2**20} MiB:{digest.hexdigest()} ({size} bytes)"


def executable_problem(program: str) -> str | None:
    """Why `program` cannot be run as found on PATH (or as a path), else None."""
    found = shutil.which(program)
    if found is None:
        return f"no executable '{program}' on PATH" if "/" not in program else f"no executable file {program}"
    return None


def find_claude(executable: str | None) -> str:
    """Claude Code's CLI: the given path, else `claude` on PATH, else where set-up put it in the checkout (or in
    the working directory's `.tools`); the name alone when none is there (the run then fails to start, saying
    where it looked)."""
    if executable:
        return executable
    for place in (shutil.which("claude"), CHECKOUT / NODE_BIN / "claude", Path.cwd() / NODE_BIN / "claude"):
        if place and Path(place).is_file():
            return str(place)
    return "claude"


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
    """Claude Code headless, in a configuration of its own: `claude -p` with HOME and CLAUDE_CONFIG_DIR in the
    run's directory (empty: none of the operator's settings, hooks, skills, subagents, CLAUDE.md or memory), no
    setting sources (`--setting-sources ""`: no project or local settings of wherever the run is), skills and slash
    commands off, CLAUDE_ENV, only the jg server (`--strict-mcp-config`), built-in tools off (`--tools ""`), every
    jg tool allowed without prompting, the prompt on stdin and the stream-json events as the agent's log. Its init
    event is its own account of what it had (jg_mcp.campaign.agent_account). Credentials come from the environment
    only (ANTHROPIC_API_KEY, or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`): a login kept in ~/.claude is
    not read."""

    name = "claude-code"
    kept = ""

    def __init__(self, executable: str | None = None, model: str | None = None, extra_args: list[str] | None = None):
        self.executable = find_claude(executable)
        self.model = model
        self.extra_args = extra_args or []

    def _exe(self) -> str:
        return shutil.which(self.executable) or self.executable

    def missing(self) -> str | None:
        if executable_problem(self.executable) is None:
            return None
        return (
            f"Claude Code's CLI is not found ({self.executable}: not on PATH nor in {CHECKOUT / NODE_BIN}): "
            "run .ci/setup, or pass --agent-executable PATH"
        )

    def version(self) -> str:
        return _version_of([self._exe(), "--version"])

    def launch(self, inputs: RunInputs) -> Launch:
        own = inputs.run_dir / "claude"
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
            "",
            "--disable-slash-commands",
            "--no-session-persistence",
        ]
        model = inputs.model or self.model
        if model:
            argv += ["--model", model]
        return Launch(
            argv=[*argv, *self.extra_args],
            env={"HOME": str(own / "home"), "CLAUDE_CONFIG_DIR": str(own / "config"), **CLAUDE_ENV},
            withheld=sorted(n for n in os.environ if n.startswith(CLAUDE_SETTINGS) and n not in CLAUDE_ACCESS),
            cwd=str(inputs.run_dir / "agent"),
            files={str(inputs.mcp_config): inputs.mcp_config.read_text()},
            stdin_file=str(inputs.prompt_file),
            dirs=[str(own / "home"), str(own / "config")],
        )

    def account(self, log_text: str) -> AgentAccount | None:
        return claude_init(log_text)

    def diagnose(self, log_text: str, stderr_text: str) -> str | None:
        events = _last_json_lines(log_text)
        result = next((e for e in reversed(events) if e.get("type") == "result"), None)
        error = next((e["error"] for e in events if e.get("type") == "assistant" and e.get("error")), None)
        if result is not None and result.get("is_error"):
            why = f"claude-code: {error + ': ' if error else ''}{result.get('result') or result.get('subtype')}"
            if error == "authentication_failed":
                why += (
                    " (a run has a configuration of its own and reads no login from ~/.claude: set "
                    "ANTHROPIC_API_KEY, or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`)"
                )
            return why
        if result is None:
            tail = (stderr_text.strip().splitlines() or ["no result event in its log"])[-1]
            return f"claude-code: {tail[:REASON_CHARS]}"
        return None


class CommandTemplate:
    """Any agent CLI, from a template: `{mcp_config}`, `{prompt_file}`, `{prompt}`, `{workspace}`, `{model}`
    and `{run_dir}` are substituted (shell-quoted), then the line is split like a shell would."""

    name = "command"
    kept = COMMAND_KEPT

    def __init__(self, template: str, name: str = "command"):
        if "{mcp_config}" not in template:
            raise UsageError("--agent-cmd must pass {mcp_config} to the agent (the only MCP server it may use)")
        self.template = template
        self.name = name

    def version(self) -> str:
        """What runs rather than what it says of itself (a CLI's `--version` need not change with its build): the
        digest of the executable the template starts, its first word found on PATH as the shell would and its links
        followed, so another build is another run. A wrapper script is identified as itself, not what it starts.
        With no such executable the version names why: the run then fails to start (`missing`), never a result."""
        words = shlex.split(self.template)
        found = shutil.which(words[0]) if words else None
        if found is None:
            return f"unknown: {self.missing()}"
        try:
            return executable_digest(Path(found).resolve())
        except OSError as exc:
            why = exc.strerror or exc
            raise UsageError(f"cannot read the agent's executable {found} to identify it: {why}") from None

    def missing(self) -> str | None:
        words = shlex.split(self.template)
        return executable_problem(words[0]) if words else "an empty --agent-cmd"

    def account(self, log_text: str) -> AgentAccount | None:
        return None

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
        return f"{self.name}: {tail[-1][:REASON_CHARS]}" if tail else None


class Scripted:
    """The deterministic scripted client as an agent process (jg_mcp.campaign.scripted_agent): `solve` writes
    the demo's axpy solution, `idle` never writes one, `overrun` keeps calling tools past its budget, `stall`
    stops calling anything."""

    def __init__(self, behaviour: str = "solve"):
        if behaviour not in SCRIPTED_BEHAVIOURS:
            raise UsageError(f"unknown scripted behaviour '{behaviour}' (one of {', '.join(SCRIPTED_BEHAVIOURS)})")
        self.behaviour = behaviour
        self.name = "scripted" if behaviour == "solve" else f"scripted-{behaviour}"

    kept = ""

    def version(self) -> str:
        return f"jg-mcp {jg_mcp.__version__} scripted"

    def missing(self) -> str | None:
        return None

    def account(self, log_text: str) -> AgentAccount | None:
        return scripted_account(log_text)

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
        return f"scripted: {tail[-1][:REASON_CHARS]}" if tail else None


def make_agent(name: str, model: str | None = None, agent_cmd: str | None = None, executable: str | None = None):
    """The adapter for an agent name: claude-code, command (with agent_cmd), scripted[-idle|-overrun]."""
    if name == "claude-code":
        return ClaudeCode(executable, model)
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
