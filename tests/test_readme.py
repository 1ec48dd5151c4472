"""Every command shown in README.md and docs/ works exactly as written, from the repository root, after
`bash .ci/setup --tests`.

Each command of a `bash` block is covered one of three ways, and a command that none covers fails
`test_every_command_shown_is_covered` (so a new one cannot go untested):

- run as written: the PATH line, `goals list` and `goals show`, the Inspector CLI's `tools/list`, `claude mcp add`
  then `claude mcp list` (in a temporary HOME), the HTTP block with its token (served, added to Claude Code, listed
  as connected), `campaign --dry-run`, the GPU check's `--help`, `h200_runs.py` and `h200_spread.py`; `audit` and
  `replay` with `transcripts/RUN_ID.jsonl` (and `report.json`) filled in from the demo's run;
- parsed by jg-mcp's own argparse (`jg_mcp.cli.build_parser`), where running needs a GPU, an agent, an LLM, a
  Ray cluster, a long-lived server or minutes of CPU: `serve` (stdio and HTTP on a fixed port), `eval` on a
  workspace of a goal's session, `run`, `campaign --executor ray`, `goals validate`, `table` on a campaign's
  runs;
- checked against the tool's own `--help` (each option shown must be one of its options), where running would
  install or download: `bash .ci/setup` (whose choices tests/test_setup.py checks against stand-in tools, and
  whose test command .ci/run runs), `python3 -m pip download`, `python3 -m venv`, `pip install --no-index`.
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

from jg_mcp.record.conditions import CONDITIONS
from tests.support import REPO, demo_dir, demo_run, node_tool

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
README = (REPO / "README.md").read_text()
JG = ".venv/bin/jg-mcp"
PY = ".venv/bin/python"
INSPECTOR = ".tools/node_modules/.bin/mcp-inspector"
CLAUDE = ".tools/node_modules/.bin/claude"


def blocks(language: str, text: str = README) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)


def without_comment(line: str) -> str:
    """The line as typed, less a trailing `# comment` (a `#` inside quotes or a word stays)."""
    words = shlex.split(line, comments=True)
    if not words:
        return ""
    for m in re.finditer(r"\s#", line):
        if shlex.split(line[: m.start()]) == words:
            return line[: m.start()].strip()
    return line.strip()


def block_commands(block: str) -> list[str]:
    lines = (without_comment(ln) for ln in block.replace("\\\n", " ").splitlines())
    return [" ".join(ln.split()) for ln in lines if ln]


def commands(pages: list[Path] = PAGES) -> list[str]:
    """Each command line of the pages' bash blocks as typed, continuation lines joined, comments dropped."""
    return [c for page in pages for block in blocks("bash", page.read_text()) for c in block_commands(block)]


def starting(prefix: str, pages: list[Path] = PAGES) -> list[str]:
    found = [c for c in commands(pages) if c == prefix or c.startswith(prefix + " ")]
    assert found, f"no page shows a `{prefix}` command"
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


RUN = (
    "export PATH=",
    f"{JG} goals list",
    f"{JG} goals show",
    f"{INSPECTOR} --cli",
    f"{CLAUDE} mcp",
    "export CLAUDE_CONFIG_DIR=",
    f"{CLAUDE} --strict-mcp-config",
    "(umask 077;",
    f"{JG} serve --goal gemm_fp8 --transport http --port 8766 --token-file jg.token &",
    f"{JG} campaign eval/campaigns/example.yaml --dry-run",
    f"{JG} audit transcripts/RUN_ID.jsonl",
    f"{JG} replay transcripts/RUN_ID.jsonl",
    f"{PY} eval/h200_check.py --help",
    f"{PY} eval/h200_runs.py",
    f"{PY} eval/h200_spread.py",
)
"""Commands that tests here run as written (by the prefix each test looks for)."""

PARSED = (
    f"{JG} serve",
    f"{JG} eval",
    f"{JG} run",
    f"{JG} campaign eval/campaigns/example.yaml --executor ray",
    f"{JG} goals validate",
    f"{JG} table runs/example",
)
"""jg-mcp commands parsed by its argparse but not run (a GPU, an agent, a cluster, a server or minutes of CPU)."""

HELP_ONLY = {
    "bash .ci/setup": ["bash", ".ci/setup", "--help"],
    "JG_SYSTEM_TORCH=1 bash .ci/setup": ["bash", ".ci/setup", "--help"],
    "python3 -m pip download": [PY, "-m", "pip", "download", "--help"],
    "python3 -m venv": [PY, "-m", "venv", "--help"],
    f"{PY} -m pip install --no-index": [PY, "-m", "pip", "install", "--help"],
    f"{PY} eval/h200_check.py --out": [PY, "eval/h200_check.py", "--help"],
}
"""Commands that install, download or need a GPU, by prefix, with the help command that must list each option they
use."""


def covered(command: str) -> str | None:
    if any(command.startswith(p) for p in RUN):
        return "run"
    if any(command.startswith(p) for p in PARSED):
        return "parsed"
    if any(command.startswith(p) for p in HELP_ONLY):
        return "help"
    return None


def test_the_two_commands_at_the_top_are_setup_then_demo_and_setup_for_tests_then_tests():
    assert commands([REPO / "README.md"])[:2] == [
        "bash .ci/setup && .venv/bin/jg-mcp demo",
        "bash .ci/setup --tests && .venv/bin/python -m pytest -q",
    ]
    ci = [ln for ln in (REPO / ".ci" / "run").read_text().splitlines() if ln and not ln.startswith("#")]
    assert "bash .ci/setup --tests" in ci and ".venv/bin/python -m pytest -q" in ci, ".ci/run runs the README's"


def test_the_readme_is_a_front_door():
    assert len(README.splitlines()) <= 250
    for page in ("eval", "timing", "sandbox", "transcripts", "goals", "campaigns", "gpu-hosts"):
        assert f"](docs/{page}.md)" in README and (REPO / "docs" / f"{page}.md").is_file(), page


def test_every_link_between_the_pages_leads_somewhere():
    pages = [*PAGES, REPO / "CHANGELOG.md", REPO / "AGENTS.md", REPO / "lab" / "README.md"]
    for page in pages:
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            target = (page.parent / link).resolve()
            assert target.exists() or target == REPO / "docs" / "threat-model.md", f"{page.name}: {link}"


def test_after_the_demo_the_readme_says_what_to_try_next():
    """The section after the set-up commands: the session page, replay, attaching an agent, a campaign; the
    sections it points to, and those the lead edits (Sandbox, HTTP, Campaigns, Attach an agent), exist."""
    sections = re.findall(r"^## (.+)$", README, re.M)
    assert sections[0] == "The demo, and what to try next"
    assert {"Attach an agent", "HTTP", "Sandbox", "Campaigns"} <= set(sections)
    demo = README.split("## The demo, and what to try next")[1].split("\n## ")[0]
    for step in ("session.html", "jg-mcp replay", "](#attach-an-agent)", "](#campaigns)"):
        assert step in demo, step


def test_agents_md_states_the_layers_where_probes_and_results_go_and_the_subject_limit():
    agents = (REPO / "AGENTS.md").read_text()
    layers = "core < host < policy < record < live and eval < review < campaign < commands"
    stated = re.sub(r"\s*\([^)]*\)", "", agents.split("## Layers")[1].split("\n\n")[2])
    assert " ".join(stated.split()).rstrip(".") == layers
    assert "`lab/`" in agents and "`eval/results/h200/runs/`" in agents and "at most 72 characters" in agents


def test_every_command_shown_is_covered():
    missing = [c for c in commands() if covered(c) is None]
    assert not missing, f"commands no test runs, parses or checks: {missing}"


def test_no_command_uses_a_bare_name_that_setup_does_not_put_on_path():
    for command in commands():
        first = shlex.split(command.lstrip("("))[0]
        assert first not in ("jg-mcp", "claude", "npx", "mcp-inspector", "python", "pip"), command


@pytest.mark.parametrize("command", sorted({c for c in commands() if c.startswith(JG + " ")}))
def test_every_jg_mcp_command_shown_parses(command):
    from jg_mcp.cli import build_parser

    words = shlex.split(command.rstrip("&").strip())
    args = build_parser().parse_args(words[1:])
    assert args.func is not None


@pytest.mark.slow
@pytest.mark.parametrize("prefix", sorted(HELP_ONLY))
def test_commands_that_install_use_only_options_their_tool_has(prefix):
    shown = [c for c in commands() if c.startswith(prefix)]
    assert shown, f"no page shows `{prefix}`"
    helped = subprocess.run(HELP_ONLY[prefix], cwd=REPO, capture_output=True, text=True, timeout=120)
    text = helped.stdout + helped.stderr
    for command in shown:
        for option in (w.split("=")[0] for w in shlex.split(command) if w.startswith("--")):
            assert option in text, f"`{command}`: {option} is not in `{' '.join(HELP_ONLY[prefix])}`"


@pytest.mark.slow
def test_goals_list_and_show_as_written():
    listed = sh(starting(f"{JG} goals list")[0])
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 10 and "INVALID" not in listed.stdout
    shown = sh(starting(f"{JG} goals show")[0])
    assert shown.returncode == 0 and shown.stdout.startswith("# Goal: FP8"), shown.stderr


@pytest.mark.slow
def test_the_campaign_dry_run_as_written():
    """The shipped example names agents and GPUs this machine may lack: the dry run says which, and exits 1 when
    any is missing (a campaign that cannot start is no result), 0 when all are there."""
    (command,) = set(starting(f"{JG} campaign eval/campaigns/example.yaml --dry-run"))
    done = sh(command)
    assert done.stdout.strip()
    said = done.stdout + done.stderr
    missing = "no executable" in said or "no GPU" in said
    assert done.returncode == (1 if missing else 0), said


@pytest.mark.slow
def test_the_goal_only_claude_code_invocation_as_written_has_only_the_four_tools(tmp_path):
    """The README's by-hand goal-only invocation, asked for one headless turn (no API key: the init event comes
    before the model is called): Claude Code lists the four jg tools and nothing else, jg connected."""
    node_tool("claude")
    (block,) = [b for b in blocks("bash") if "--strict-mcp-config" in b]
    lines = block_commands(block)
    script = "\n".join([*lines[:-1], lines[-1] + " -p hello --output-format stream-json --verbose"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    with leaves_no_sessions():
        done = sh(script, env=env | {"HOME": str(tmp_path)}, timeout=240)
    events = [json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith("{")]
    init = next((e for e in events if e.get("type") == "system" and e.get("subtype") == "init"), None)
    assert init is not None, done.stdout[-2000:] + done.stderr[-2000:]
    assert sorted(init["tools"]) == sorted(
        f"mcp__jg__{t}" for t in ("query_gpu", "read_file", "run_command", "write_file")
    )
    assert [s["status"] for s in init["mcp_servers"] if s["name"] == "jg"] == ["connected"]


@pytest.mark.slow
def test_the_gpu_checks_commands_as_written():
    """The GPU check's help, and the committed runs read by h200_runs.py and h200_spread.py."""
    for command in [*starting(f"{PY} eval/h200_check.py --help"), *starting(f"{PY} eval/h200_runs.py")]:
        done = sh(command)
        assert done.returncode == 0 and done.stdout.strip(), command + done.stderr
    (spread,) = starting(f"{PY} eval/h200_spread.py")
    done = sh(spread)
    assert done.returncode == 0 and "| goal | shape |" in done.stdout, done.stderr


@pytest.mark.slow
def test_audit_and_replay_as_written_on_the_demos_transcript(tmp_path):
    transcript, report = demo_run(), demo_dir() / "eval.json"
    for command in {*starting(f"{JG} audit"), *starting(f"{JG} replay")}:
        filled = (
            command.replace("/tmp/", f"{tmp_path}/")
            .replace("transcripts/RUN_ID.jsonl", str(transcript))
            .replace("report.json", str(report))
        )
        for output in ("session.html", "audit.json", "audit.html"):
            filled = filled.replace(f" {output}", f" {tmp_path / output}")
        done = sh(filled)
        # the demo's solution is not gemm_fp8's, so an audit given its eval report fails its policy check only
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, command + done.stderr
        assert done.stdout.strip(), command
        if " replay " in command:
            assert done.returncode == 0, command + done.stderr


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
    add, listing = [c for c in starting(CLAUDE) if "--transport" not in c][:2]
    assert " mcp add " in add and listing.endswith(" mcp list")
    with leaves_no_sessions():
        added = sh(add, env=env)
        assert added.returncode == 0, added.stderr
        listed = sh(listing, env=env)
    line = next((ln for ln in listed.stdout.splitlines() if ln.startswith("jg:")), listed.stdout + listed.stderr)
    assert "Connected" in line


@pytest.mark.slow
def test_the_http_block_with_its_token_connects_claude_code(tmp_path):
    """The README's HTTP block, run as one script as written: a token file, the server on it in the background,
    Claude Code given the bearer header, then `claude mcp list` reports it connected (a client without the header
    gets 401, so the line must carry the token the server reads)."""
    node_tool("claude")
    (block,) = [b for b in blocks("bash") if "--token-file jg.token" in b]
    lines = block_commands(block)
    env = {**os.environ, "HOME": str(tmp_path)}
    script = "\n".join(lines[:3]) + "\nsleep 3\n" + lines[3] + '\nkill "$!" 2>/dev/null; wait\nrm -f jg.token\n'
    with leaves_no_sessions():
        done = sh(script, env=env, timeout=240)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("jg-http:")), done.stdout + done.stderr)
    assert "Connected" in line, done.stderr[-3000:]
    assert not (REPO / "jg.token").exists()


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
