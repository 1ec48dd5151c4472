"""An independent client, the MCP Inspector CLI (npm), drives `jg-mcp serve` over stdio."""

from __future__ import annotations

import json
import subprocess

import pytest

from jg_mcp.record.conditions import CONDITIONS
from tests.support import node_tool, serve_argv

pytestmark = pytest.mark.slow


@pytest.fixture
def inspect(tmp_path):
    cli = node_tool("mcp-inspector-cli")
    server = serve_argv("--workspace", tmp_path / "ws", "--transcripts", tmp_path / "tr")

    def call(*args: str) -> dict:
        proc = subprocess.run(
            [str(cli), "--cli", *server, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    return call


def test_inspector_sees_exactly_the_four_tools(inspect):
    tools = inspect("--method", "tools/list")["tools"]
    assert tuple(t["name"] for t in tools) == CONDITIONS["goal-only"].tools


def test_inspector_reads_the_goal_resource(inspect):
    res = inspect("--method", "resources/read", "--uri", "goal://gemm_fp8")
    assert "## Objective" in res["contents"][0]["text"]


def test_inspector_gets_the_goal_prompt(inspect):
    res = inspect("--method", "prompts/get", "--prompt-name", "goal")
    assert "# Goal: FP8" in res["messages"][0]["content"]["text"]


def test_inspector_round_trips_a_file_and_runs_a_command(inspect, tmp_path):
    w = inspect(
        "--method",
        "tools/call",
        "--tool-name",
        "write_file",
        "--tool-arg",
        "path=hello.txt",
        "--tool-arg",
        "content=hi there",
    )
    assert w["structuredContent"]["size"] == 8
    r = inspect("--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=hello.txt")
    assert r["structuredContent"]["content"] == "hi there"
    c = inspect("--method", "tools/call", "--tool-name", "run_command", "--tool-arg", "command=cat hello.txt")
    assert c["structuredContent"]["stdout"] == "hi there" and c["structuredContent"]["exit_code"] == 0


def test_inspector_gets_a_clear_error_for_an_escape_and_the_server_survives(inspect):
    r = inspect("--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=/etc/passwd")
    assert r["isError"] is True and "outside the workspace" in r["content"][0]["text"]
    after = inspect("--method", "tools/call", "--tool-name", "run_command", "--tool-arg", "command=echo ok")
    assert after["structuredContent"]["stdout"] == "ok\n"
