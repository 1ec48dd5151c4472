"""The command line: useful --help everywhere, exit codes 0 / 1 / 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jg_mcp.cli import COMMAND_MODULES, build_parser


def jg(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jg_mcp", *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def subcommands() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices)


@pytest.mark.parametrize("command", subcommands())
def test_every_subcommand_has_help(command):
    proc = jg(command, "--help")
    assert proc.returncode == 0 and "usage: jg-mcp " + command in proc.stdout
    assert len(proc.stdout.splitlines()) > 3


def test_the_core_commands_exist():
    assert {"serve", "goals", "gpu", "demo"} <= set(subcommands())


def test_usage_errors_exit_2():
    assert jg().returncode == 2
    assert jg("serve").returncode == 2
    assert jg("no-such-command").returncode == 2


def test_goals_show_prints_the_goal():
    proc = jg("goals", "show", "gemm_fp8")
    assert proc.returncode == 0 and proc.stdout.startswith("# Goal: FP8")


def test_goals_show_unknown_goal_fails_with_message():
    proc = jg("goals", "show", "no_such_goal")
    assert proc.returncode == 1 and "no such goal file" in proc.stderr


def test_gpu_reports_without_crashing():
    proc = jg("gpu", "--json")
    assert proc.returncode == 0 and '"available"' in proc.stdout


@pytest.mark.parametrize("args", [["--help"], ["eval", "--help"], ["gpu"], ["goals", "list"]])
def test_commands_other_than_serve_and_demo_run_without_the_mcp_sdk(args):
    """GPU nodes often lack the MCP SDK: the eval, goals and gpu commands must still start there."""
    code = "import sys; sys.modules['mcp'] = None; from jg_mcp.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]


HEAVY = {"torch", "triton", "numpy", "mcp"}
LIST_MODULES = "import atexit, runpy, sys; atexit.register(lambda: print(*sorted(sys.modules), file=sys.stderr)); "


@pytest.mark.parametrize("args", [["--help"], ["goals", "--help"]])
def test_help_imports_no_heavy_package(args):
    """Every command module is imported to build the parser: one that imports torch, triton or the MCP SDK
    at its top makes every `jg-mcp --help` take seconds. They import them when their command runs."""
    code = LIST_MODULES + "runpy.run_module('jg_mcp', run_name='__main__')"
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and "usage: jg-mcp" in proc.stdout, proc.stderr[-2000:]
    imported = set(proc.stderr.split())
    assert set(COMMAND_MODULES) <= imported, "the parser is built from every command module"
    heavy = {name.split(".")[0] for name in imported} & HEAVY
    assert not heavy, f"jg-mcp {' '.join(args)} imported {', '.join(sorted(heavy))}"
