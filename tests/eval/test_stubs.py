"""Libraries a goal forbids are covered in the candidate's sandbox by stubs that fail every call: built from the real
library's own exports (names, symbol versions, soname), they load wherever the real one did and answer an error."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from eval_suite import GOALS

from jg_mcp.eval.native.stubs import ERROR_STATUS, forbids_gemm, stub_for, stub_source
from jg_mcp.eval.processes.isolation import bwrap_argv, prepare

needs_cc = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("cc", "nm", "objdump")), reason="cc, nm and objdump are needed to stub"
)
LIBRARY = """
int demo_create(void** handle) { *handle = (void*)1; return 0; }
int demo_gemm(void* handle, int n) { return handle ? 0 : 1; }
const char* demo_GetStatusString(int status) { return status ? "error" : "success"; }
"""
CALLER = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
handle = ctypes.c_void_p()
lib.demo_GetStatusString.restype = ctypes.c_char_p
print(lib.demo_create(ctypes.byref(handle)), lib.demo_gemm(handle, 4), lib.demo_GetStatusString(0).decode())
"""


@pytest.fixture
def real(tmp_path) -> Path:
    (tmp_path / "demo.c").write_text(LIBRARY)
    (tmp_path / "demo.map").write_text(
        "DEMO_1.0 { global: demo_create; demo_gemm; demo_GetStatusString; local: *; };\n"
    )
    lib = tmp_path / "lib" / "libdemo.so.1"
    lib.parent.mkdir()
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "demo.c")]
        + [f"-Wl,--version-script={tmp_path / 'demo.map'}", "-Wl,-soname,libdemo.so.1"],
        check=True,
    )
    return lib


def _call(argv: list[str], lib: Path) -> list[str]:
    done = subprocess.run([*argv, sys.executable, "-c", CALLER, str(lib)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.slow
@needs_cc
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_stub_bound_over_a_library_fails_every_call_and_keeps_its_versions(real, tmp_path):
    assert _call([], real) == ["0", "0", "success"]
    stub = stub_for(real, tmp_path / "stubs")
    assert stub != real and stub.name == real.name
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(stub)], capture_output=True, text=True).stdout
    assert "demo_create@@DEMO_1.0" in symbols and "demo_gemm@@DEMO_1.0" in symbols
    covered = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(stub), str(real)]
    assert _call(covered, real)[:3] == [str(ERROR_STATUS), str(ERROR_STATUS), "stubbed:"]
    assert stub_for(real, tmp_path / "stubs") == stub  # built once per file


def test_an_unversioned_library_gets_every_name_global():
    source, script = stub_source({"f": None, "getName": None})
    assert script == "{ global: *; };\n"
    assert f"int f(void) {{ return {ERROR_STATUS}; }}" in source and "const char* getName(void)" in source


@pytest.mark.parametrize("goal", sorted(p.stem for p in GOALS.glob("*.yaml")))
def test_cublas_is_stubbed_for_the_goals_that_forbid_a_gemm(goal):
    forbidden = yaml.safe_load((GOALS / f"{goal}.yaml").read_text())["forbidden"]
    gemm_like = goal.startswith(("gemm", "grouped_gemm", "attention"))
    assert forbids_gemm(forbidden) == gemm_like


@pytest.mark.slow
def test_the_candidates_sandbox_binds_each_stub_over_its_library(tmp_path):
    (tmp_path / "solution").mkdir()
    (tmp_path / "cache").mkdir()
    prepare(tmp_path / "solution", tmp_path / "cache")
    covers = (("/stubs/libcublas.so.13", "/usr/lib/libcublas.so.13"),)
    argv = bwrap_argv(tmp_path / "solution", tmp_path / "cache", {}, None, (), covers)
    i = argv.index("/stubs/libcublas.so.13")
    assert argv[i - 1 : i + 2] == ["--ro-bind", "/stubs/libcublas.so.13", "/usr/lib/libcublas.so.13"]
