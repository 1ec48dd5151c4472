"""The Claude Code adapter against the real CLI, without an API key.

The operator's own Claude Code set-up (HOME/.claude with a skill, a subagent, a CLAUDE.md, a memory file and a hook,
and a CLAUDE.md above the runs directory) must not reach a goal-only run. Two witnesses, both what the CLI itself
prints or sends: its stream-json init event (its account of its tools, skills, subagents, memory and model), and the
model request it sends, captured by a local HTTP endpoint standing in for the API (ANTHROPIC_BASE_URL) that records
each request and answers 400, so the run ends at its first turn. Without any credentials a run ends at once,
`failed to start`, naming the fix.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from jg_mcp.campaign.agent_account import BUILT_IN_SUBAGENTS
from jg_mcp.campaign.agents import CLAUDE_ACCESS
from jg_mcp.campaign.plan import Plan
from jg_mcp.campaign.run_record import RunSpec, load_run
from tests.support import DEMO_GOAL, jg

pytestmark = pytest.mark.slow
SECRETS = ("OPERATOR-CLAUDE-MD", "OPERATOR-MEMORY", "OPERATOR-SKILL", "OPERATOR-SUBAGENT", "PROJECT-CLAUDE-MD")
JG_TOOLS = ["mcp__jg__query_gpu", "mcp__jg__read_file", "mcp__jg__run_command", "mcp__jg__write_file"]


OPERATOR_SETTINGS = {"ANTHROPIC_MODEL": "operator-shell-model", "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "4321"}
"""Claude Code's own settings in the operator's shell, which would choose the run's model and limits."""


def operator_home(root: Path, cwd: Path) -> Path:
    """A home whose Claude Code set-up holds everything the goal-only condition leaves out; its auto memory is
    keyed by the agent's working directory, as Claude Code keys it."""
    claude = root / ".claude"
    (claude / "skills" / "secret-skill").mkdir(parents=True)
    (claude / "skills" / "secret-skill" / "SKILL.md").write_text(
        "---\nname: secret-skill\ndescription: OPERATOR-SKILL trick\n---\nUse the OPERATOR-SKILL trick.\n"
    )
    (claude / "agents").mkdir()
    (claude / "agents" / "helper-agent.md").write_text(
        "---\nname: helper-agent\ndescription: OPERATOR-SUBAGENT\n---\nYou help.\n"
    )
    (claude / "CLAUDE.md").write_text("OPERATOR-CLAUDE-MD: always use the secret trick.\n")
    for key in {str(cwd).replace("/", "-"), re.sub(r"[^A-Za-z0-9]", "-", str(cwd))}:
        memory = claude / "projects" / key / "memory"
        memory.mkdir(parents=True)
        (memory / "MEMORY.md").write_text("OPERATOR-MEMORY: the last attempt's notes.\n")
    hook = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo OPERATOR-HOOK"}]}]}}
    (claude / "settings.json").write_text(json.dumps(hook))
    return root


class Capture(BaseHTTPRequestHandler):
    """Records each model request's body; answers 400 (not retried), so the agent's first turn ends the run."""

    bodies: list[dict] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        Capture.bodies.append(json.loads(body))
        answer = json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": "captured"}})
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, *_: object) -> None:
        return


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def bare_env(**extra: str) -> dict[str, str]:
    """The environment without credentials, and without the CLI on PATH (the run must find it in the checkout)."""
    env = {k: v for k, v in os.environ.items() if k not in CLAUDE_ACCESS}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".tools" not in p)
    return env | extra


@pytest.fixture(scope="module")
def captured(tmp_path_factory, api):
    """A goal-only run of Claude Code by an operator with a full set-up, its model requests captured."""
    tmp = tmp_path_factory.mktemp("claude")
    project = tmp / "project"
    (project / "runs").mkdir(parents=True)
    (project / "CLAUDE.md").write_text("PROJECT-CLAUDE-MD: the project's instructions.\n")
    run_id = Plan.resolve(RunSpec(agent="claude-code", goal=str(DEMO_GOAL))).run_id
    home = operator_home(tmp / "home", project / "runs" / run_id / "agent")
    Capture.bodies.clear()
    env = bare_env(HOME=str(home), ANTHROPIC_API_KEY="not-a-key", ANTHROPIC_BASE_URL=api, **OPERATOR_SETTINGS)
    proc = jg(
        "run", "--agent", "claude-code", "--goal", str(DEMO_GOAL), "--out", project / "runs", env=env, timeout=240
    )
    [run_dir] = (project / "runs").iterdir()
    return run_dir, proc, list(Capture.bodies)


def test_the_operators_skills_subagents_and_memory_do_not_reach_the_agent_by_its_own_account(captured):
    run_dir, proc, _ = captured
    assert proc.returncode == 1, proc.stderr
    init = json.loads((run_dir / "agent.log").read_text().splitlines()[0])
    assert init["type"] == "system" and init["subtype"] == "init"
    assert sorted(init["tools"]) == JG_TOOLS, "built-in tools on, or the jg server's tools missing at the first turn"
    assert init["mcp_servers"] == [{"name": "jg", "status": "connected"}]
    assert init["skills"] == [] and init["plugins"] == []
    assert init["slash_commands"] == ["mcp__jg__goal"], "only the jg server's own prompt"
    assert set(init["agents"]) <= BUILT_IN_SUBAGENTS and "memory_paths" not in init
    record = load_run(run_dir)
    assert record.agent_account.skills == [] and sorted(record.agent_account.tools) == JG_TOOLS
    assert record.condition_violations == []
    assert record.model == init["model"] and record.spec.model is None, "the model the agent named is recorded"
    assert record.agent_version == init["claude_code_version"]
    assert "managed-settings" in record.agent_kept or "managed-settings" in record.agent_account.kept
    assert record.status == "failed to start" and "API Error: 400 captured" in record.exit_reason
    assert "--setting-sources" in record.launch.argv and "user" not in record.launch.argv
    assert ".tools/node_modules/.bin/claude" in record.launch.argv[0]


def test_the_model_is_sent_only_the_jg_tools_and_none_of_the_operators_text(captured):
    _, _, bodies = captured
    assert bodies and not [b for b in bodies if b.get("model") == "operator-shell-model" or b.get("max_tokens") == 4321]
    assert set(OPERATOR_SETTINGS) <= set(load_run(captured[0]).launch.withheld)
    offered = [sorted(t["name"] for t in body.get("tools", [])) for body in bodies]
    assert JG_TOOLS in offered, f"no model request offered the jg tools: {offered}"
    assert all(tools in ([], JG_TOOLS) for tools in offered), offered
    for body in bodies:
        text = json.dumps(body)
        assert not [s for s in SECRETS if s in text], [s for s in SECRETS if s in text]
        assert "OPERATOR-HOOK" not in text


def test_a_run_without_credentials_fails_to_start_and_names_the_fix(tmp_path):
    (tmp_path / "home").mkdir()
    proc = jg(
        "run",
        "--agent",
        "claude-code",
        "--model",
        "claude-sonnet-4-5",
        "--goal",
        str(DEMO_GOAL),
        "--out",
        tmp_path / "runs",
        env=bare_env(HOME=str(tmp_path / "home")),
        timeout=240,
    )
    assert proc.returncode == 1, proc.stderr
    [run_dir] = (tmp_path / "runs").iterdir()
    record = load_run(run_dir)
    assert record.status == "failed to start" and record.eval.status == "no solution"
    assert "Not logged in" in record.exit_reason, record.exit_reason
    assert "set ANTHROPIC_API_KEY, or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`" in record.exit_reason
    assert f"{run_dir.name}: failed to start: " in proc.stdout
    assert record.model == "claude-sonnet-4-5" and record.identity.model == "claude-sonnet-4-5"
    argv = record.launch.argv
    assert argv[1:5] == ["-p", "--output-format", "stream-json", "--verbose"]
    assert argv[argv.index("--mcp-config") + 1] == str(run_dir / "mcp.json")
    assert "--strict-mcp-config" in argv and argv[argv.index("--tools") + 1] == ""
    assert record.launch.stdin_file.endswith("prompt.md")
