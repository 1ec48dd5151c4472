"""The MCP conformance suite (@modelcontextprotocol/conformance, Node 22) against `jg-mcp serve --transport http`.

The suite sends no token, so tests/tools/bearer_preload.mjs adds ours to every request it makes.
Scenarios that need the suite's own fixture tools, resources and prompts (an "everything" server)
are listed in tests/tools/conformance_expected_failures.yml; the suite fails on any other failure
and on any listed scenario that starts passing, so the list stays exact.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support import TOKEN, HttpServer

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tests" / "tools"
NODE_MODULES = REPO / ".tools" / "conformance" / "node_modules"
GENERIC = [
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "prompts-list",
    "tools-call-error",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
]


def test_the_generic_server_scenarios_pass_over_http(tmp_path):
    node, cli = (
        NODE_MODULES / ".bin" / "node",
        NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
    )
    if not (node.exists() and cli.exists()):
        pytest.skip("conformance suite not installed: run tests/tools/install_node_tools.sh")
    with HttpServer(tmp_path) as server:
        done = subprocess.run(
            [
                str(node),
                "--import",
                str(TOOLS / "bearer_preload.mjs"),
                str(cli),
                "server",
                "--url",
                server.url,
                "--expected-failures",
                str(TOOLS / "conformance_expected_failures.yml"),
                "-o",
                str(tmp_path / "results"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "JG_MCP_TOKEN": TOKEN},
        )
    summary = done.stdout[done.stdout.find("=== SUMMARY ===") :]
    assert done.returncode == 0, summary or done.stdout[-3000:] + done.stderr[-3000:]
    for scenario in GENERIC:
        assert f"✓ {scenario}:" in summary, summary
