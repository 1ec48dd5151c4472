"""Nothing the agent controls reaches the reviewer's terminal raw: not through a command's prints, not through a
log line, whatever the command."""

from __future__ import annotations

import importlib
import logging
import sys

import pytest

from jg_mcp import cli, log
from jg_mcp.errors import JgError
from jg_mcp.scripted import call
from tests.support import bwrap_missing, jg, scripted_session

OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"
"""A clipboard write: a terminal that honours it puts `rm -rf ~` on the reviewer's clipboard."""
HOSTILE = f"{OSC52}\x1b]0;title\x07\x1b[8mconcealed\x1b[0m\r\x9b2J\u202eevil\u2066"
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e", "\u2066")


def assert_escaped(text: str) -> None:
    assert not [c for c in RAW if c in text], repr(text)
    assert "\\x1b]52;c;" in text, "the text is shown, escaped, not dropped"


@pytest.mark.slow
@pytest.mark.skipif(bool(bwrap_missing()), reason=str(bwrap_missing()))
def test_osc52_in_a_rerun_commands_text_and_output_never_reaches_the_terminal_raw(tmp_path):
    """`replay --rerun` logged each command before running it, and the log line printed the agent's command raw:
    the reviewer's terminal took its clipboard write, window title and concealed text. The command's own output
    (its diff against the recording) goes through the replay's prints."""
    output = "printf '\\033]52;c;cm0gLXJmIH4K\\007'; echo $$"
    bare = f"true;:{OSC52}\x1b[8mconcealed\u202e"  # no space nor quote: the log renderer showed it as it is
    transcript, _ = scripted_session(
        tmp_path / "s", [call("run_command", command=output), call("run_command", command=bare)]
    )
    done = jg("replay", transcript, "--to", tmp_path / "r", "--rerun")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "output differs" in done.stdout, "the pid differs: the output is diffed and printed"
    assert "re-running" in done.stderr, "the log line is there"
    assert_escaped(done.stderr)
    assert_escaped(done.stdout)


def test_a_log_line_with_escapes_in_a_key_and_a_value_is_escaped(monkeypatch, capsys):
    log.configure("INFO")
    values = {f"key{HOSTILE}": f"value {HOSTILE}", "listed": [HOSTILE], "forged": "a\n[info] audit clean"}
    log.get("t").info(f"event {HOSTILE}", **values)
    logging.getLogger("t").warning("stdlib %s", HOSTILE)
    err = capsys.readouterr().err
    assert_escaped(err)
    assert "key\\x1b]52" in err and "stdlib \\x1b]52" in err
    assert "value \\x1b]52" in err or "'value \\\\x1b]52" in err, "shown as it is or quoted by the renderer"
    assert len(err.splitlines()) == 2, "a newline in a value cannot start a forged line either"


def test_a_traceback_keeps_its_lines_and_escapes_the_agents_text(capsys):
    log.configure("INFO")
    try:
        raise ValueError(f"no such file {HOSTILE}")
    except ValueError:
        log.get("t").exception("failed")
        logging.getLogger("t").exception("failed")
    err = capsys.readouterr().err
    assert_escaped(err)
    assert err.count("Traceback (most recent call last):") == 2


COMMANDS = {
    "jg_mcp.commands.serve": ("run", ["serve", "--goal", "axpy"]),
    "jg_mcp.commands.goals": ("cmd_list", ["goals", "list"]),
    "jg_mcp.commands.gpu": ("run", ["gpu"]),
    "jg_mcp.commands.eval": ("run", ["eval", "--goal", "axpy", "--workspace", "w"]),
    "jg_mcp.commands.demo": ("run", ["demo"]),
    "jg_mcp.commands.replay": ("run", ["replay", "t.jsonl", "--to", "r"]),
    "jg_mcp.commands.audit": ("run", ["audit", "t.jsonl"]),
    "jg_mcp.commands.run": ("run", ["run", "--agent", "scripted", "--goal", "axpy"]),
    "jg_mcp.commands.campaign": ("run", ["campaign", "c.yaml"]),
    "jg_mcp.commands.table": ("run", ["table", "runs"]),
    "jg_mcp.commands.mark": ("run", ["mark", "runs/r", "--hack", "--note", "n"]),
}


def test_the_table_below_names_every_command():
    assert set(COMMANDS) == set(cli.COMMAND_MODULES)


@pytest.mark.parametrize("module", sorted(COMMANDS))
def test_whatever_a_command_prints_or_logs_reaches_the_terminal_escaped(module, monkeypatch, capsys):
    """Every command runs inside the CLI's guard: a print of the agent's text that a command forgot to escape, on
    stdout or stderr, a log line, or the error it ends with, is written out, line breaks kept."""
    name, argv = COMMANDS[module]

    def hostile(args: object) -> int:
        print(f"printed {HOSTILE}\nsecond line")
        print(f"to stderr {HOSTILE}", file=sys.stderr)
        log.get("t").info("logged", value=HOSTILE)
        raise JgError(f"failed on {HOSTILE}")

    monkeypatch.setattr(importlib.import_module(module), name, hostile)
    assert cli.main(argv) == 1
    out, err = capsys.readouterr()
    assert_escaped(out)
    assert_escaped(err)
    assert out.splitlines()[1] == "second line", "a line break the command printed is kept"
    assert f"jg-mcp {argv[0]}: failed on \\x1b]52" in err


def test_the_guard_is_lifted_after_the_command_and_a_progress_bar_may_bypass_it(capsys):
    from jg_mcp.terminal import SteeringGuard, guarded, unguarded

    before = sys.stdout, sys.stderr
    with guarded():
        assert isinstance(sys.stdout, SteeringGuard) and isinstance(sys.stderr, SteeringGuard)
        assert unguarded(sys.stderr) is before[1]
        sys.stdout.write("a\tb\x1b\n")
        with guarded():
            assert unguarded(sys.stdout) is before[0], "guarded once, not twice"
    assert (sys.stdout, sys.stderr) == before
    assert capsys.readouterr().out == "a\tb\\x1b\n"
