"""The README's commands work exactly as written, from the repository root, after `bash .ci/setup`.

Every jg-mcp command shown is run in its `--help` form (and each option it shows must be in that help);
the ones that finish quickly are run as written: `goals list`, `goals show`, the Inspector CLI's
`tools/list`, `claude mcp add` then `claude mcp list` (in a temporary HOME), the PATH line.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from jg_mcp.campaign.conditions import CONDITIONS
from tests.support import REPO, node_tool

README = (REPO / "README.md").read_text()
JG = ".venv/bin/jg-mcp"
INSPECTOR = ".tools/node_modules/.bin/mcp-inspector"
CLAUDE = ".tools/node_modules/.bin/claude"


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, re.S | re.M)


def without_comment(line: str) -> str:
    """The line as typed, less a trailing `# comment` (a `#` inside quotes or a word stays)."""
    words = shlex.split(line, comments=True)
    if not words:
        return ""
    for m in re.finditer(r"\s#", line):
        if shlex.split(line[: m.start()]) == words:
            return line[: m.start()].strip()
    return line.strip()


def commands() -> list[str]:
    """Each command line of the README's bash blocks as typed, continuation lines joined, comments dropped."""
    lines = (without_comment(ln) for block in blocks("bash") for ln in block.replace("\\\n", " ").splitlines())
    return [" ".join(ln.split()) for ln in lines if ln]


def starting(prefix: str) -> list[str]:
    found = [c for c in commands() if c == prefix or c.startswith(prefix + " ")]
    assert found, f"the README shows no `{prefix}` command"
    return found


def sh(
    command: str, env: dict[str, str] | None = None, cwd: Path = REPO, timeout: float = 180
) -> subprocess.CompletedProcess:
    """A command line as a user types it into bash."""
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@contextmanager
def leaves_no_sessions(goal: str = "gemm_fp8") -> Iterator[None]:
    """Sessions started from the repository root write transcripts/ and runs/ there: remove the new ones
    (only this goal's, named GOAL-TIME-ID, so that nothing else written there meanwhile is touched)."""
    dirs = [REPO / "transcripts", REPO / "runs"]

    def sessions() -> set[Path]:
        return {p for d in dirs if d.is_dir() for p in d.glob(f"{goal}-*")}

    before = sessions()
    try:
        yield
    finally:
        for path in sessions() - before:
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def test_the_two_commands_at_the_top_are_setup_then_demo_and_setup_then_tests():
    assert commands()[:2] == [
        "bash .ci/setup && .venv/bin/jg-mcp demo",
        "bash .ci/setup && .venv/bin/python -m pytest -q",
    ]


def test_no_command_uses_a_bare_name_that_setup_does_not_put_on_path():
    for command in commands():
        first = shlex.split(command)[0]
        assert first not in ("jg-mcp", "claude", "npx", "mcp-inspector"), command


@pytest.mark.parametrize("command", sorted({c for c in commands() if c.startswith(JG + " ")}))
def test_every_jg_mcp_command_shown_has_its_help_and_the_options_it_uses(command):
    words = [w.strip("[]") for w in shlex.split(command)]
    sub = words[1:3] if words[1] == "goals" else words[1:2]
    done = subprocess.run(
        [str(REPO / JG), *sub, "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    for option in (w for w in words if w.startswith("--")):
        assert option in done.stdout, f"`{command}`: {option} is not an option of jg-mcp {' '.join(sub)}"


def test_goals_list_and_show_as_written():
    listed = sh(starting(f"{JG} goals list")[0])
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 10 and "INVALID" not in listed.stdout
    shown = sh(starting(f"{JG} goals show")[0])
    assert shown.returncode == 0 and shown.stdout.startswith("# Goal: FP8"), shown.stderr


def test_the_path_line_puts_jg_mcp_and_the_node_tools_on_path():
    node_tool("claude")
    (line,) = [c for c in commands() if c.startswith("export PATH=")]
    done = sh(line + "; command -v jg-mcp claude mcp-inspector")
    assert done.stdout.split() == [str(REPO / JG), str(REPO / CLAUDE), str(REPO / INSPECTOR)], done.stderr


@pytest.mark.slow
def test_the_inspector_command_lists_the_four_tools_as_written():
    node_tool("mcp-inspector")
    (command,) = starting(INSPECTOR)
    with leaves_no_sessions():
        done = sh(command)
    assert done.returncode == 0, done.stderr[-2000:]
    assert tuple(t["name"] for t in json.loads(done.stdout)["tools"]) == CONDITIONS["goal-only"].tools


@pytest.mark.slow
def test_claude_mcp_add_then_list_as_written_reports_connected(tmp_path):
    node_tool("claude")
    env = {**os.environ, "HOME": str(tmp_path)}
    add, listing = starting(CLAUDE)
    assert " mcp add " in add and listing.endswith(" mcp list")
    with leaves_no_sessions():
        added = sh(add, env=env)
        assert added.returncode == 0, added.stderr
        listed = sh(listing, env=env)
    line = next((ln for ln in listed.stdout.splitlines() if ln.startswith("jg:")), listed.stdout + listed.stderr)
    assert "Connected" in line


@pytest.mark.slow
def test_the_mcp_json_server_starts_from_any_directory(tmp_path):
    """The `.mcp.json` example, with the repository's path filled in, is a server the Inspector can list."""
    node_tool("mcp-inspector")
    (config,) = [json.loads(b.replace("/path/to/jg-mcp", str(REPO))) for b in blocks("json")]
    server = config["mcpServers"]["jg"]
    done = subprocess.run(
        [str(REPO / INSPECTOR), "--cli", server["command"], *server["args"], "--method", "tools/list"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert tuple(t["name"] for t in json.loads(done.stdout)["tools"]) == CONDITIONS["goal-only"].tools
