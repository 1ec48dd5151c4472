"""Agent adapters: the launch each builds (recorded verbatim) and the reasons they read from their logs."""

from __future__ import annotations

import json
import shlex

import pytest

from jg_mcp.campaign import RunInputs
from jg_mcp.campaign.agent_account import claude_init, violations
from jg_mcp.campaign.agents import CHECKOUT, NODE_BIN, ClaudeCode, CommandTemplate, Scripted, make_agent
from jg_mcp.errors import JgError


@pytest.fixture
def inputs(tmp_path):
    (tmp_path / "mcp.json").write_text('{"mcpServers": {"jg": {"command": "jg-mcp", "args": ["serve"]}}}')
    (tmp_path / "prompt.md").write_text("Make it 'fast'.\n")
    return RunInputs(
        run_dir=tmp_path,
        mcp_config=tmp_path / "mcp.json",
        server_argv=["jg-mcp", "serve"],
        prompt_file=tmp_path / "prompt.md",
        model="m1",
        seed=3,
    )


def test_a_command_template_gets_every_placeholder_shell_quoted(inputs, tmp_path):
    agent = CommandTemplate("my-cli --mcp {mcp_config} --model {model} --seed {seed} -p {prompt} --in {workspace}")
    launch = agent.launch(inputs)
    assert launch.argv == [
        "my-cli",
        "--mcp",
        str(tmp_path / "mcp.json"),
        "--model",
        "m1",
        "--seed",
        "3",
        "-p",
        "Make it 'fast'.\n",
        "--in",
        str(tmp_path / "workspace"),
    ]
    assert launch.files == {str(tmp_path / "mcp.json"): (tmp_path / "mcp.json").read_text()}
    with pytest.raises(JgError, match=r"must pass \{mcp_config\}"):
        CommandTemplate("my-cli --prompt-file {prompt_file}")


def test_claude_code_gets_its_own_empty_configuration_only_the_jg_server_and_no_builtin_tools(inputs, tmp_path):
    launch = ClaudeCode("claude-bin").launch(inputs)
    assert shlex.join(launch.argv) == (
        f"claude-bin -p --output-format stream-json --verbose --mcp-config {tmp_path / 'mcp.json'} "
        "--strict-mcp-config --tools '' --allowedTools mcp__jg --setting-sources '' --disable-slash-commands "
        "--no-session-persistence --model m1"
    )
    assert launch.stdin_file == str(tmp_path / "prompt.md")
    assert launch.env["HOME"] == str(tmp_path / "claude" / "home")
    assert launch.env["CLAUDE_CONFIG_DIR"] == str(tmp_path / "claude" / "config")
    assert launch.dirs == [launch.env["HOME"], launch.env["CLAUDE_CONFIG_DIR"]]
    for off in ("AUTO_MEMORY", "CLAUDE_MDS", "BUNDLED_SKILLS"):
        assert launch.env[f"CLAUDE_CODE_DISABLE_{off}"] == "1"
    assert launch.env["MCP_CONNECTION_NONBLOCKING"] == "0", "the first turn must wait for the jg server's tools"


def test_the_operators_claude_settings_never_reach_a_run_and_are_named(inputs, monkeypatch):
    """Variables that configure Claude Code in the operator's shell (the model, output tokens, timeouts) would make
    the run another condition under the same id: withheld from the CLI and recorded by name; how it reaches the
    API (credentials, endpoint) passes."""
    for name in ("ANTHROPIC_MODEL", "CLAUDE_CODE_MAX_OUTPUT_TOKENS", "MAX_THINKING_TOKENS", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(name, "operator's")
    launch = ClaudeCode("claude-bin").launch(inputs)
    assert {"ANTHROPIC_MODEL", "CLAUDE_CODE_MAX_OUTPUT_TOKENS", "MAX_THINKING_TOKENS"} <= set(launch.withheld)
    assert "ANTHROPIC_API_KEY" not in launch.withheld and "PATH" not in launch.withheld


INIT = {
    "type": "system",
    "subtype": "init",
    "tools": ["mcp__jg__read_file", "Bash"],
    "mcp_servers": [{"name": "jg", "status": "connected"}, {"name": "github", "status": "connected"}],
    "model": "claude-opus-4-8",
    "claude_code_version": "2.1.197",
    "slash_commands": ["secret-skill"],
    "agents": ["general-purpose", "helper-agent"],
    "skills": ["secret-skill"],
    "plugins": [],
    "memory_paths": {"auto": "/home/op/.claude/projects/x/memory/"},
}


def test_the_agents_init_event_is_its_account_and_everything_outside_the_condition_is_named():
    account = claude_init("not json\n" + json.dumps(INIT) + "\n")
    assert (account.version, account.model) == ("2.1.197", "claude-opus-4-8")
    assert violations(account) == [
        "the agent had tool 'Bash' is not one of the jg server's",
        "the agent had MCP server 'github: connected' is not the jg server",
        "the agent had skill 'secret-skill'",
        "the agent had slash command 'secret-skill'",
        "the agent had memory 'auto: /home/op/.claude/projects/x/memory/'",
        "the agent had subagent 'helper-agent' is not built in",
    ]
    clean = {**INIT, "tools": ["mcp__jg__read_file"], "mcp_servers": [{"name": "jg", "status": "connected"}]}
    clean |= {"slash_commands": [], "skills": [], "agents": ["general-purpose"], "memory_paths": {}}
    assert violations(claude_init(json.dumps(clean))) == []
    assert claude_init('{"type": "result"}') is None


def test_claude_code_is_found_where_set_up_put_it_or_the_fix_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", "/nonexistent")
    found = ClaudeCode()
    assert found.executable == str(CHECKOUT / NODE_BIN / "claude") and found.missing() is None
    monkeypatch.setattr("jg_mcp.campaign.agents.CHECKOUT", tmp_path)
    monkeypatch.chdir(tmp_path)
    lost = ClaudeCode()
    assert lost.executable == "claude"
    assert lost.missing() == (
        f"Claude Code's CLI is not found (claude: not on PATH nor in {tmp_path / NODE_BIN}): "
        "run .ci/setup, or pass --agent-executable PATH"
    )


def test_claude_code_reads_an_error_result_or_a_missing_one_from_its_log():
    agent = ClaudeCode()
    failed = "\n".join(
        json.dumps(e)
        for e in (
            {"type": "system", "subtype": "init"},
            {"type": "assistant", "error": "authentication_failed", "message": {}},
            {"type": "result", "is_error": True, "result": "Not logged in · Please run /login"},
        )
    )
    assert agent.diagnose(failed, "") == (
        "claude-code: authentication_failed: Not logged in · Please run /login (a run has a configuration of its "
        "own and reads no login from ~/.claude: set ANTHROPIC_API_KEY, or CLAUDE_CODE_OAUTH_TOKEN from "
        "`claude setup-token`)"
    )
    assert agent.diagnose('{"type": "result", "is_error": false}', "") is None
    assert agent.diagnose("", "Error: unknown option\n") == "claude-code: Error: unknown option"


def test_agent_names_map_to_adapters_and_unknown_ones_are_refused():
    assert isinstance(make_agent("claude-code"), ClaudeCode)
    assert make_agent("scripted-overrun").name == "scripted-overrun" and make_agent("scripted").name == "scripted"
    assert isinstance(make_agent("mine", agent_cmd="x {mcp_config}"), CommandTemplate)
    with pytest.raises(JgError, match="unknown agent 'gpt'"):
        make_agent("gpt")
    with pytest.raises(JgError, match="unknown scripted behaviour"):
        Scripted("sleepy")
