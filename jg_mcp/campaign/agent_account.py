"""The agent's own account of what it had: tools, MCP servers, skills, subagents, memory, model and version, as
its first event says (Claude Code's stream-json `system/init`), and the check that the condition allows all of it.

The goal-only condition gives an agent the jg server's tools and nothing else of its own: no built-in tool, no other
MCP server, no skill, slash command, plugin, memory file or auto memory. Claude Code always lists its built-in
subagents; they are reachable only through its Agent tool, so with every built-in tool off they are listed and kept
(KEPT), never usable. Anything else the account names is a violation, and a run with one is not a result.
"""

from __future__ import annotations

import json

from jg_mcp.models import Strict

JG_TOOL_PREFIX = "mcp__jg__"
"""Claude Code's prefix for a tool or prompt (offered as a slash command) of the MCP server called `jg`."""
BUILT_IN_SUBAGENTS = frozenset({"claude", "Explore", "general-purpose", "Plan", "statusline-setup"})
"""Subagents Claude Code always lists; only its Agent tool starts one."""
KEPT = (
    "Claude Code's built-in subagents are listed but unusable (no Agent tool); admin-managed policy settings "
    "(/etc/claude-code/managed-settings.json) apply whatever a run sets"
)
"""What a Claude Code run keeps that its flags cannot switch off, recorded with each run."""
INIT_SCAN_LINES = 50
"""Lines of the agent's log searched for its init event (it is the first Claude Code prints)."""


class AgentAccount(Strict):
    """What the agent said it had when it started."""

    source: str
    """Where the account comes from (e.g. `claude-code stream-json init event`)."""
    version: str | None = None
    """The agent's version, as it names itself."""
    model: str | None = None
    """The model it says it uses."""
    tools: list[str] = []
    """Tools the model is offered."""
    mcp_servers: list[str] = []
    """MCP servers it was configured with (name: status)."""
    skills: list[str] = []
    """Skills it loaded."""
    slash_commands: list[str] = []
    """Slash commands it offers."""
    subagents: list[str] = []
    """Subagents it lists."""
    plugins: list[str] = []
    """Plugins it loaded."""
    memory_paths: list[str] = []
    """Memory locations it reads and writes (auto memory)."""
    kept: str = ""
    """What the adapter cannot switch off, stated."""


def _names(items: object) -> list[str]:
    if not isinstance(items, list):
        return []
    out = []
    for item in items:
        if isinstance(item, dict):
            name = str(item.get("name", "?"))
            out.append(f"{name}: {item['status']}" if "status" in item else name)
        else:
            out.append(str(item))
    return out


def claude_init(log_text: str) -> AgentAccount | None:
    """The account in Claude Code's stream-json `system/init` event, or None when the log has none."""
    for line in log_text.splitlines()[:INIT_SCAN_LINES]:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not (isinstance(event, dict) and event.get("type") == "system" and event.get("subtype") == "init"):
            continue
        memory = event.get("memory_paths")
        return AgentAccount(
            source="claude-code stream-json init event",
            version=str(event["claude_code_version"]) if "claude_code_version" in event else None,
            model=str(event["model"]) if "model" in event else None,
            tools=_names(event.get("tools")),
            mcp_servers=_names(event.get("mcp_servers")),
            skills=_names(event.get("skills")),
            slash_commands=_names(event.get("slash_commands")),
            subagents=_names(event.get("agents")),
            plugins=_names(event.get("plugins")),
            memory_paths=[f"{k}: {v}" for k, v in memory.items()] if isinstance(memory, dict) else _names(memory),
            kept=KEPT,
        )
    return None


def violations(account: AgentAccount) -> list[str]:
    """Everything the account names that the goal-only condition does not give an agent, as messages."""
    problems = [f"tool '{t}' is not one of the jg server's" for t in account.tools if not t.startswith(JG_TOOL_PREFIX)]
    problems += [f"MCP server '{s}' is not the jg server" for s in account.mcp_servers if s.split(":")[0] != "jg"]
    for field, what in (
        ("skills", "skill"),
        ("slash_commands", "slash command"),
        ("plugins", "plugin"),
        ("memory_paths", "memory"),
    ):
        problems += [f"{what} '{v}'" for v in getattr(account, field) if not v.startswith(JG_TOOL_PREFIX)]
    problems += [f"subagent '{a}' is not built in" for a in account.subagents if a not in BUILT_IN_SUBAGENTS]
    return [f"the agent had {p}" for p in problems]


def scripted_account(log_text: str) -> AgentAccount | None:
    """The scripted agent's account: the `init` line it prints once connected (the tools the server listed)."""
    for line in log_text.splitlines()[:INIT_SCAN_LINES]:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("step") == "init":
            return AgentAccount(
                source="scripted agent init line",
                version=str(event.get("version")),
                tools=[JG_TOOL_PREFIX + str(t) for t in event.get("tools", [])],
                mcp_servers=["jg: connected"],
            )
    return None
