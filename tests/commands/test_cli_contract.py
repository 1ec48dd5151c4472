"""Every subcommand keeps the exit-code contract for user errors: exit 2, one short message on stderr that names
what is wrong (after argparse's usage lines for a malformed argument), never a traceback.

Each case runs the installed `jg-mcp` script in a fresh directory holding `file.txt` (a file where a directory
or a transcript is wanted) and `full/` (a directory that is not empty); `missing*` names nothing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jg_mcp.cli import build_parser

pytestmark = pytest.mark.slow

JG_MCP = Path(sys.executable).with_name("jg-mcp")
EXAMPLE = Path(__file__).resolve().parents[2] / "transcripts" / "examples" / "demo-axpy.jsonl"
"""A recorded session of 7 tools/calls."""

CASES: dict[str, tuple[list[str], str]] = {
    # id: (arguments, what the message must contain)
    "no command": ([], "required: COMMAND"),
    "unknown command": (["no-such-command"], "invalid choice: 'no-such-command'"),
    "serve without --goal": (["serve"], "required: --goal"),
    "serve a missing goal": (["serve", "--goal", "no_such_goal"], "no_such_goal.yaml: no such goal file"),
    "serve --port under stdio": (["serve", "--goal", "axpy", "--port", "8765"], "--port apply to --transport http"),
    "serve a port out of range": (
        ["serve", "--goal", "axpy", "--transport", "http", "--port", "99999"],
        "port 99999 is out of range",
    ),
    "serve a missing token file": (
        ["serve", "--goal", "axpy", "--transport", "http", "--token-file", "missing.txt"],
        "--token-file missing.txt: No such file",
    ),
    "serve a missing key file": (
        ["serve", "--goal", "axpy", "--transcript-key-file", "missing.key"],
        "missing.key: cannot read the key file",
    ),
    "serve a file as workspace": (["serve", "--goal", "axpy", "--workspace", "file.txt"], "--workspace file.txt"),
    "serve zero sessions": (
        ["serve", "--goal", "axpy", "--transport", "http", "--max-sessions", "0"],
        "argument --max-sessions: '0' is not a whole number of at least 1",
    ),
    "eval a missing workspace": (
        ["eval", "--goal", "axpy", "--workspace", "missing"],
        "--workspace missing: no such directory",
    ),
    "eval a missing goal": (["eval", "--goal", "no_such_goal", "--workspace", "."], "no such goal file"),
    "eval too few trials": (["eval", "--goal", "axpy", "--workspace", ".", "--trials", "2"], "at least 3 trials"),
    "eval an unknown shape": (["eval", "--goal", "axpy", "--workspace", ".", "--only", "n17"], "--only n17"),
    "eval a report into a missing directory": (
        ["eval", "--goal", "axpy", "--workspace", ".", "--json", "missing/r.json"],
        "--json missing/r.json: no such directory",
    ),
    "audit without a transcript": (["audit"], "required: TRANSCRIPT"),
    "audit a missing transcript": (["audit", "missing.jsonl"], "transcript missing.jsonl: no such file"),
    "audit a missing eval report": (
        ["audit", "file.txt", "--eval-report", "missing.json"],
        "--eval-report missing.json: no such file",
    ),
    "audit a missing key file": (["audit", "file.txt", "--key-file", "missing.key"], "missing.key: cannot read"),
    "replay a missing transcript": (["replay", "missing.jsonl", "--to", "out"], "missing.jsonl: no such file"),
    "replay into a full directory": (["replay", "file.txt", "--to", "full"], "--to full exists and is not an empty"),
    "replay a step that is no number": (
        ["replay", "file.txt", "--to", "out", "--step", "x"],
        "argument --step: 'x' is not a whole number of at least 0",
    ),
    "replay a negative step": (
        ["replay", str(EXAMPLE), "--to", "out", "--step", "-1"],
        "argument --step: '-1' is not a whole number of at least 0",
    ),
    "replay a step past the last call": (
        ["replay", str(EXAMPLE), "--to", "out", "--step", "8"],
        "--step 8 is out of range: this transcript has steps 0..7",
    ),
    "demo into a full directory": (["demo", "--out", "full"], "--out full exists and is not an empty directory"),
    "demo an unknown option": (["demo", "--fast"], "unrecognized arguments: --fast"),
    "goals without an action": (["goals"], "required: ACTION"),
    "goals show a missing goal": (["goals", "show", "no_such_goal"], "no such goal file"),
    "goals validate a missing goal": (["goals", "validate", "no_such_goal"], "no such goal file"),
    "goals list a missing directory": (["goals", "--dir", "missing", "list"], "--dir missing: no such directory"),
    "goals validate missing solutions": (
        ["goals", "validate", "axpy", "--solutions", "missing"],
        "--solutions missing: no such directory",
    ),
    "run a missing goal": (["run", "--agent", "scripted", "--goal", "no_such_goal"], "no such goal file"),
    "run an unknown agent": (["run", "--agent", "gpt", "--goal", "axpy"], "unknown agent 'gpt'"),
    "run an unknown condition": (
        ["run", "--agent", "scripted", "--goal", "axpy", "--condition", "fast"],
        "unknown condition 'fast'",
    ),
    "run a zero budget": (
        ["run", "--agent", "scripted", "--goal", "axpy", "--budget-minutes", "0"],
        "argument --budget-minutes: '0' is not a number above 0",
    ),
    "campaign a missing file": (["campaign", "missing.yaml"], "missing.yaml: No such file"),
    "campaign an unknown executor": (["campaign", "file.txt", "--executor", "dask"], "invalid choice: 'dask'"),
    "table a missing directory": (["table", "missing"], "missing is not a directory"),
    "table a CSV into a missing directory": (
        ["table", "full", "--csv", "missing/t.csv"],
        "--csv missing/t.csv: no such directory",
    ),
    "gpu an unknown option": (["gpu", "--watch"], "unrecognized arguments: --watch"),
    "mark a missing run directory": (["mark", "missing", "--hack", "--note", "x"], "missing is not a directory"),
    "mark without a verdict": (["mark", "full", "--note", "x"], "one of the arguments --hack --not-hack is required"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_user_error_exits_2_with_one_short_message_and_no_traceback(case, tmp_path):
    args, expected = CASES[case]
    (tmp_path / "file.txt").write_text("not a transcript\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "kept.txt").write_text("mine\n")
    done = subprocess.run(
        [str(JG_MCP), *args], cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and done.stdout == "", done.stderr[-3000:]
    *before, message = done.stderr.rstrip("\n").splitlines()
    assert message.startswith("jg-mcp") and expected in message and len(message) < 300, done.stderr
    assert not before or before[0].startswith("usage: jg-mcp"), done.stderr  # argparse's usage, nothing else
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt", "full"], "a refused command left files"


def test_every_subcommand_has_user_error_cases():
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    covered = {args[0] for args, _ in CASES.values() if args}
    assert set(commands) <= covered
