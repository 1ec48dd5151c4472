"""The open policy, the eval's default: a solution may be written in any language and several files. Native code is
built from the workspace's sources inside the candidate's sandbox, judged by what it binds once loaded, and kept by
the hash of its sources so a repeat eval does not build again; prebuilt binaries are never copied; kernel libraries
are hidden from the sandbox; the rules the agent reads fit in a minute. The native hacks: test_native_hacks.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from jg_mcp.errors import JgError
from jg_mcp.eval import Reason
from jg_mcp.eval.native.sources import MAX_SOURCE_FILES, read_sources
from jg_mcp.goal_text import render_markdown
from jg_mcp.goals import load_goal
from jg_mcp.policy.open_policy import open_check, open_rules
from tests.eval.eval_suite import GOALS, NATIVE, NATIVE_BUILDS, REPO, eval_solution

DEMO_GOAL = REPO / "jg_mcp" / "demo_goal" / "axpy.yaml"
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler: native code cannot be built")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.mark.slow
@needs_gxx
@pytest.mark.parametrize(
    ("name", "goal"), [("axpy_cpp", DEMO_GOAL), ("softmax_cpp", "softmax")], ids=["axpy_cpp", "softmax_cpp"]
)
def test_a_correct_cpp_solution_is_accepted_with_every_file_listed(cache, tmp_path, name, goal):
    report = eval_solution(NATIVE / name / "solution.py", goal, tmp_path, device="cpu", **NATIVE_BUILDS)
    assert report.accepted, [f.detail for f in report.findings]
    assert report.policy == "open"
    expected = sorted(p.name for p in (NATIVE / name).iterdir() if p.is_file())
    assert sorted(s.path for s in report.sources) == expected
    assert report.sources[0].path == "solution.py"
    assert all(len(s.sha256) == 64 and s.bytes > 0 for s in report.sources)


@pytest.mark.slow
@needs_gxx
def test_a_repeat_eval_of_the_same_sources_does_not_build_again(cache, tmp_path):
    """softmax_cpp builds softmax.cpp with `load`, which torch's builder (ninja) rebuilds when a source is newer
    than its objects: every eval writes its copies anew, so they carry one fixed time, else the kept build is
    built again (as it was on an H100)."""
    solution = NATIVE / "softmax_cpp" / "solution.py"
    first = eval_solution(solution, "softmax", tmp_path / "1", device="cpu", **NATIVE_BUILDS)
    assert first.accepted, [f.detail for f in first.findings]
    (library,) = (cache / "extensions").rglob("softmax_rows*.so")  # the module's other tests keep builds there too
    built = library.stat().st_mtime_ns
    second = eval_solution(solution, "softmax", tmp_path / "2", device="cpu", **NATIVE_BUILDS)
    assert second.accepted, [f.detail for f in second.findings]
    (again,) = (cache / "extensions").rglob("softmax_rows*.so")
    assert again == library
    assert again.stat().st_mtime_ns == built, "the second eval built the library again"


@pytest.mark.slow
@needs_gxx
@needs_bwrap
def test_an_eval_that_took_the_processes_started_ahead_keeps_its_build(tmp_path, monkeypatch):
    """Evals in a row take the processes (and the work directory) the eval before started for them; the spare set's
    close removes that directory, so the build is kept before it (on an H100 no eval that took spares kept one)."""
    from jg_mcp.eval import EvalOptions, evaluate
    from jg_mcp.eval.processes.spares import Spares

    monkeypatch.setenv("JG_MCP_CACHE", str(tmp_path / "cache"))  # a cache no other test kept a build in
    options = {"device": "cpu", "shapes": "smoke", "domain_shapes": 0, "timeout_s": 400.0, "isolation": "bwrap"}
    triton_ws, native_ws = tmp_path / "triton", tmp_path / "native"
    triton_ws.mkdir()
    shutil.copytree(NATIVE / "axpy_cpp", native_ws)
    (triton_ws / "solution.py").write_text(
        "import torch\n\n\ndef kernel(x, y, alpha):\n    return torch.add(y, x * alpha)\n"
    )
    with Spares() as spares:
        evaluate(EvalOptions(goal=DEMO_GOAL, workspace=triton_ws, **options), spares=spares)
        report = evaluate(EvalOptions(goal=DEMO_GOAL, workspace=native_ws, **options), spares=spares)
        assert spares.taken == 1
    assert report.accepted, [f.detail for f in report.findings]
    assert list((tmp_path / "cache" / "extensions").rglob("*.so")), "the build of an eval that took spares was not kept"


@pytest.mark.slow
def test_the_triton_policy_still_refuses_native_code(tmp_path):
    report = eval_solution(NATIVE / "axpy_cpp" / "solution.py", DEMO_GOAL, tmp_path, device="cpu", policy="triton")
    assert report.policy == "triton"
    assert Reason.STATIC_DYNAMIC in report.reasons
    assert [s.path for s in report.sources] == ["solution.py"]


@pytest.mark.slow
@needs_bwrap
def test_a_kernel_library_is_hidden_from_the_candidate_whatever_the_spelling(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "flash_attn").mkdir(parents=True)
    (site / "flash_attn" / "__init__.py").write_text("def axpy(x, y, alpha):\n    return alpha * x + y\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.syspath_prepend(str(site))
    src = tmp_path / "src" / "solution.py"
    src.parent.mkdir()
    src.write_text(
        "import importlib\n\nfast = importlib.import_module('flash_' + 'attn')\n\n\n"
        "def kernel(x, y, alpha):\n    return fast.axpy(x, y, alpha)\n"
    )
    report = eval_solution(src, DEMO_GOAL, tmp_path / "runs", device="cpu", policy="open", isolation="bwrap")
    assert not report.accepted
    assert Reason.IMPORT_ERROR in report.reasons, report.reasons
    assert any("hidden" in f.detail for f in report.findings), [f.detail for f in report.findings]


def test_an_import_of_a_kernel_library_is_named_by_the_source_check():
    found = open_check("import flash_attn.flash_attn_interface as f\nfrom liger_kernel import ops\n", [])
    assert [f.reason for f in found] == [Reason.STATIC_IMPORT, Reason.STATIC_IMPORT]
    assert "line 1" in found[0].detail and "line 2" in found[1].detail


def test_the_open_check_keeps_forbidden_operators_and_drops_the_allow_list():
    source = "import ctypes, os, threading\nimport torch\n\n\ndef kernel(a, b):\n    return torch.mm(a, b.t())\n"
    reasons = {f.reason for f in open_check(source, ["torch.mm"])}
    assert reasons == {Reason.STATIC_FORBIDDEN}


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "build").mkdir()
    (ws / ".git").mkdir()
    (ws / "solution.py").write_text("import helper\n")
    (ws / "helper.py").write_text("X = 1\n")
    (ws / "kernels" / "gemm.cu").write_text("// kernel\n")
    (ws / "kernels" / "gemm.cuh").write_text("// header\n")
    (ws / "prebuilt.so").write_bytes(b"\x7fELF")
    (ws / "kernels" / "gemm.o").write_bytes(b"\x7fELF")
    (ws / "build" / "generated.cpp").write_text("// build output\n")
    (ws / ".git" / "hook.py").write_text("X = 2\n")
    (ws / "linked.py").symlink_to(root / "outside.py")
    (root / "outside.py").write_text("SECRET = 1\n")
    return ws


def test_the_sources_are_the_workspaces_source_files_and_no_binary_or_link(tmp_path):
    files = read_sources(_workspace(tmp_path), "solution.py", everything=True)
    assert [f.path for f in files] == ["solution.py", "helper.py", "kernels/gemm.cu", "kernels/gemm.cuh"]
    assert files[2].data == b"// kernel\n"
    assert [f.path for f in read_sources(_workspace(tmp_path / "b"), "solution.py", everything=False)] == [
        "solution.py"
    ]


def test_a_workspace_with_too_many_source_files_is_refused_with_the_limit(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "solution.py").write_text("")
    for i in range(MAX_SOURCE_FILES + 1):
        (ws / f"m{i}.py").write_text("")
    with pytest.raises(JgError, match=str(MAX_SOURCE_FILES)):
        read_sources(ws, "solution.py", everything=True)


@pytest.mark.parametrize("goal", sorted(p.stem for p in GOALS.glob("*.yaml")))
def test_the_rules_an_agent_reads_fit_in_800_characters(goal):
    forbidden = yaml.safe_load((GOALS / f"{goal}.yaml").read_text())["forbidden"]
    text = open_rules(forbidden)
    assert len(text) <= 800, len(text)
    assert "any language" in text and "cpp_extension" in text


def test_the_constraints_of_gemm_fp8_fit_in_1500_characters():
    page = render_markdown(load_goal(GOALS / "gemm_fp8.yaml"))
    constraints = page.split("## Constraints", 1)[1].split("## Solution contract", 1)[0]
    assert len(constraints) <= 1500, len(constraints)
    assert "Python-subset" not in constraints and "dunder" not in constraints
    triton = render_markdown(load_goal(GOALS / "gemm_fp8.yaml"), policy="triton")
    assert "dunder" in triton  # the strict policy keeps its allow-list, for competitions
