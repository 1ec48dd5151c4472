"""The Claude Code adapter against the real CLI (no login here): its MCP config connects, and a headless
run without credentials ends at once with the reason recorded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from jg_mcp.campaign.run_record import load_record
from tests.support import DEMO_GOAL, jg, node_tool

pytestmark = pytest.mark.slow
CREDENTIALS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
)


@pytest.fixture(scope="module")
def headless(tmp_path_factory):
    """A `jg-mcp run --agent claude-code` with an empty HOME and no credentials in the environment."""
    claude = node_tool("claude")
    tmp = tmp_path_factory.mktemp("claude")
    (tmp / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in CREDENTIALS} | {"HOME": str(tmp / "home")}
    start = time.monotonic()
    proc = jg(
        "run",
        "--agent",
        "claude-code",
        "--agent-executable",
        str(claude),
        "--model",
        "claude-sonnet-4-5",
        "--goal",
        str(DEMO_GOAL),
        "--out",
        str(tmp / "runs"),
        env=env,
        timeout=180,
    )
    return tmp, env, proc, time.monotonic() - start


def test_a_headless_run_without_credentials_ends_within_seconds_with_the_reason(headless):
    tmp, _, proc, seconds = headless
    assert proc.returncode == 1, proc.stderr
    assert seconds < 90
    record = load_record(tmp / "runs" / "claude-code__axpy__goal-only__s0")
    assert record.exit_reason.startswith("agent exited (code 1): claude-code: ")
    assert "Not logged in" in record.exit_reason or "authentication" in record.exit_reason, record.exit_reason
    assert record.eval.status == "no solution" and "(Claude Code)" in record.agent_version
    argv = record.launch.argv
    assert argv[1:5] == ["-p", "--output-format", "stream-json", "--verbose"]
    assert argv[argv.index("--mcp-config") + 1] == str(tmp / "runs" / record.run_id / "mcp.json")
    assert "--strict-mcp-config" in argv and argv[argv.index("--tools") + 1] == ""
    assert argv[argv.index("--model") + 1] == "claude-sonnet-4-5"
    assert record.launch.stdin_file.endswith("prompt.md")
    log = [json.loads(line) for line in (tmp / "runs" / record.run_id / "agent.log").read_text().splitlines()]
    assert log[0]["type"] == "system" and log[0]["tools"] == [] and log[-1]["type"] == "result"


def test_the_generated_mcp_config_lists_the_jg_server_connected(headless, tmp_path):
    tmp, env, _, _ = headless
    config = json.loads((tmp / "runs" / "claude-code__axpy__goal-only__s0" / "mcp.json").read_text())
    assert list(config["mcpServers"]) == ["jg"]
    (tmp_path / ".mcp.json").write_text(json.dumps(config))
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))
    listed = subprocess.run(
        [str(node_tool("claude")), "mcp", "list"],
        cwd=tmp_path,
        env={**env, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith("jg:"))
    assert "Connected" in line, listed.stdout
    shutil.rmtree(tmp_path / "home")
