"""The command line: useful --help everywhere (user errors and exit code 2: test_cli_contract.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jg_mcp.cli import COMMAND_MODULES, build_parser
from tests.support import CPU_ENVIRONMENT, jg


def subcommands() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices)


@pytest.mark.slow
@pytest.mark.parametrize("command", subcommands())
def test_every_subcommand_has_help(command):
    proc = jg(command, "--help")
    assert proc.returncode == 0 and "usage: jg-mcp " + command in proc.stdout
    assert len(proc.stdout.splitlines()) > 3


def description(help_text: str) -> str:
    """The paragraphs of a --help between the usage lines and the first list of arguments, on one line."""
    body = help_text.split("\n\n", 1)[1] if "\n\n" in help_text else ""
    kept = []
    for paragraph in body.split("\n\n"):
        if paragraph.startswith(("options:", "positional arguments:")):
            break
        kept.append(" ".join(paragraph.split()))
    return " ".join(kept)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["goals", "list"], ["one line per goal", "baselines", "Exit 1 when any goal is invalid"]),
        (["goals", "show"], ["the goal as the agent receives it", "Exit 1 for a malformed goal, 2"]),
        (["demo"], ["scripted client", "re-verifies the kernel", "`jg-mcp eval`", "audits the transcript"]),
    ],
)
def test_help_describes_what_the_command_does(args, says):
    proc = jg(*args, "--help")
    assert proc.returncode == 0, proc.stderr
    text = description(proc.stdout)
    assert all(phrase in text for phrase in says), text


@pytest.mark.slow
def test_the_command_list_says_the_demo_also_evaluates_and_audits():
    words = " ".join(jg("--help").stdout.split())
    assert "demo run a recorded end-to-end session with a scripted client, then eval and audit it" in words, words


def test_the_core_commands_exist():
    assert {"serve", "goals", "gpu", "demo"} <= set(subcommands())


@pytest.mark.slow
def test_goals_show_prints_the_goal():
    proc = jg("goals", "show", "gemm_fp8")
    assert proc.returncode == 0 and proc.stdout.startswith("# Goal: FP8")


@pytest.mark.slow
def test_a_misspelt_goal_name_gets_a_suggestion():
    proc = jg("goals", "show", "gemm_fp9")
    assert proc.returncode == 2 and proc.stderr.endswith("no such goal file; did you mean 'gemm_fp8'?\n")


@pytest.mark.slow
def test_the_demo_goal_is_found_by_name():
    proc = jg("goals", "show", "axpy")
    assert proc.returncode == 0 and proc.stdout.startswith("# Goal: Demo"), proc.stderr


@pytest.mark.slow
def test_eval_on_cuda_without_a_gpu_is_one_line_not_a_traceback(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    proc = jg("eval", "--goal", "axpy", "--workspace", str(tmp_path), "--device", "cuda")
    assert proc.returncode == 2 and proc.stderr == (
        "jg-mcp eval: --device cuda: torch sees no CUDA device (leave --device out to check on the CPU)\n"
    )


def test_eval_progress_is_plain_lines_when_stderr_is_not_a_terminal():
    import io

    from jg_mcp.commands.eval import Bar

    stream = io.StringIO()
    bar = Bar(stream)
    bar("check tiny trial 1/3")
    bar("check tiny trial 2/3")
    bar.done()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue() and len(lines) == 2
    assert lines[1].startswith("eval step 2 ") and lines[1].endswith("check tiny trial 2/3")


def test_eval_verdict_says_timing_was_skipped_and_never_prints_none():
    from jg_mcp.commands.eval import verdict_lines
    from jg_mcp.eval.report import EvalReport
    from jg_mcp.eval.report_timing import TimingMethod

    fields = {
        "goal": "axpy",
        "goal_sha256": "0" * 64,
        "solution_sha256": "1" * 64,
        "solution_file": "solution.py",
        "seed": 1,
        "environment": dict(CPU_ENVIRONMENT),
    }
    cpu = EvalReport.model_validate({**fields, "accepted": True}).model_copy(
        update={"timing": TimingMethod(skipped="no CUDA device: correctness only")}
    )
    assert verdict_lines(cpu) == "axpy: ACCEPTED; timing skipped: no CUDA device: correctness only"
    gpu = cpu.model_copy(update={"timing": TimingMethod(), "geomean_speedup": 1.23456})
    assert verdict_lines(gpu) == "axpy: ACCEPTED; geomean speedup 1.235x vs the strongest baseline"
    assert "None" not in verdict_lines(gpu.model_copy(update={"geomean_speedup": None}))


def test_gpu_description_never_prints_none():
    from jg_mcp.gpu import Device, GpuReport, describe

    device = Device(
        index=0,
        name="H200",
        uuid="u",
        compute_capability="9.0",
        memory_total_mib=1,
        memory_used_mib=0,
        memory_free_mib=1,
        utilization_gpu_pct=None,
        utilization_memory_pct=None,
        sm_clock_mhz=None,
        sm_clock_max_mhz=None,
        memory_clock_mhz=None,
        memory_clock_max_mhz=None,
        temperature_c=None,
        power_w=None,
        power_limit_w=None,
    )
    text = describe(GpuReport(available=True, devices=[device]))
    assert "None" not in text and "util n/a" in text and "driver n/a" in text
    assert describe(GpuReport(available=False)) == "No GPU: NVML reports none"


@pytest.mark.slow
def test_gpu_reports_without_crashing():
    proc = jg("gpu", "--json")
    assert proc.returncode == 0 and '"available"' in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--help"], ["eval", "--help"], ["gpu"], ["goals", "list"]])
def test_commands_other_than_serve_and_demo_run_without_the_mcp_sdk(args):
    """GPU nodes often lack the MCP SDK: the eval, goals and gpu commands must still start there."""
    code = "import sys; sys.modules['mcp'] = None; from jg_mcp.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


HEAVY = {"torch", "triton", "numpy", "mcp"}
LIST_MODULES = "import atexit, runpy, sys; atexit.register(lambda: print(*sorted(sys.modules), file=sys.stderr)); "


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--help"], ["goals", "--help"]])
def test_help_imports_no_heavy_package(args):
    """Every command module is imported to build the parser: one that imports torch, triton or the MCP SDK
    at its top makes every `jg-mcp --help` take seconds. They import them when their command runs."""
    code = LIST_MODULES + "runpy.run_module('jg_mcp', run_name='__main__')"
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 0 and "usage: jg-mcp" in proc.stdout, proc.stderr[-2000:]
    imported = set(proc.stderr.split())
    assert set(COMMAND_MODULES) <= imported, "the parser is built from every command module"
    heavy = {name.split(".")[0] for name in imported} & HEAVY
    assert not heavy, f"jg-mcp {' '.join(args)} imported {', '.join(sorted(heavy))}"
