"""Agent adapters: the launch each builds (recorded verbatim) and the reasons they read from their logs."""

from __future__ import annotations

import json
import shlex

import pytest

from jg_mcp.campaign import RunInputs
from jg_mcp.campaign.agents import ClaudeCode, CommandTemplate, Scripted, make_agent
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


def test_claude_code_gets_only_the_jg_server_no_builtin_tools_and_the_prompt_on_stdin(inputs, tmp_path):
    launch = ClaudeCode("claude-bin").launch(inputs)
    assert shlex.join(launch.argv) == (
        f"claude-bin -p --output-format stream-json --verbose --mcp-config {tmp_path / 'mcp.json'} "
        "--strict-mcp-config --tools '' --allowedTools mcp__jg --setting-sources user --no-session-persistence "
        "--model m1"
    )
    assert launch.stdin_file == str(tmp_path / "prompt.md") and launch.env == {}


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
    assert agent.diagnose(failed, "") == "claude-code: authentication_failed: Not logged in · Please run /login"
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
