"""Native code is judged by what was built and loaded, not by its text: the harness reads the libraries mapped into
the candidate's processes (from /proc, outside them) and judges the symbols the dynamic loader binds for each. The
source check refuses every torch.utils.cpp_extension build (a loaded library reaches the whole interpreter through the
Python C API); this check stays behind it, for whatever code a candidate gets mapped by another way.

The red team's `native_alias_mm` wrote `namespace q = at;` and `q::cpu::mm(a, b.t())`: the text `at::` never
appears, so the source check's pattern does not see it, and the CPU kernel is called past the dispatcher, so the
op recorder in the candidate's process does not either. It was accepted."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from eval_suite import CPU_TIMING, eval_solution

from jg_mcp.eval import Reason
from jg_mcp.eval.native.native import NativeScan

GXX = shutil.which("g++")
needs_gxx = pytest.mark.skipif(GXX is None, reason="no C++ compiler (g++): native code cannot be built here")
SLOW = {"timeout_s": 300.0}
"""An extension builds in the candidate's import (half a minute or more on a loaded 2-core machine)."""

ALIAS_MM = '''"""GEMM by ATen's own CPU mm kernel called from native code. The policy's native-library regex
looks for the text of a qualified ATen or torch call; a namespace alias (namespace q = at) spells every call without
it. The call goes straight to the CPU kernel (the cpu namespace, no dispatcher): neither run-time recorder hook sees
it."""

import torch
import torch.utils.cpp_extension

_SRC = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>
namespace q = at;
torch::Tensor gemm(torch::Tensor a, torch::Tensor b) {
    return q::cpu::mm(a, b.t());
}
"""

_ext = torch.utils.cpp_extension.load_inline(
    name="gemm_ext", cpp_sources=[_SRC], functions=["gemm"], verbose=False, extra_cflags=["-O0"]
)


def kernel(a, b, scale_a, scale_b):
    c = _ext.gemm(a.float(), b.float())
    return (c * scale_a * scale_b).to(torch.bfloat16)
'''
"""The red team's reproduction (/tmp/attack_eval/native_alias_mm/solution.py), its docstring rewrapped."""

HONEST_AXPY = '''"""z = alpha * x + y by a loop of its own in C++: allocates with torch::empty, reads sizes and data
pointers."""

import torch
import torch.utils.cpp_extension

_SRC = r"""
#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/generated/variable_factories.h>
#include <torch/csrc/utils/pybind.h>

at::Tensor axpy(const at::Tensor& x, const at::Tensor& y, const at::Tensor& alpha) {
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && x.numel() == y.numel(), "contiguous vectors of one length");
    at::Tensor z = torch::empty(x.sizes(), x.options());
    const float a = alpha.data_ptr<float>()[0];
    const float* xp = x.data_ptr<float>();
    const float* yp = y.data_ptr<float>();
    float* zp = z.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
        zp[i] = a * xp[i] + yp[i];
    }
    return z;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("axpy", &axpy); }
"""

_ext = torch.utils.cpp_extension.load_inline(
    name="axpy_ext", cpp_sources=[_SRC], extra_cflags=["-O0"], no_implicit_headers=True
)


def kernel(x, y, alpha):
    return _ext.axpy(x.contiguous(), y.contiguous(), alpha)
'''
"""An honest extension (lighter headers than torch/extension.h, so it builds in a fraction of the time)."""


def _write(root, text):
    root.mkdir(parents=True)
    (root / "solution.py").write_text(text)
    return root / "solution.py"


@pytest.mark.slow
@needs_gxx
def test_an_aten_kernel_called_through_a_namespace_alias_is_rejected_by_its_built_symbol(tmp_path):
    report = eval_solution(_write(tmp_path / "src", ALIAS_MM), "gemm_fp8", tmp_path / "runs", device="cpu", **SLOW)
    assert not report.accepted
    assert _refused_statically(report), "every native build is refused by the source check first"
    native = [f for f in report.findings if f.reason == Reason.FORBIDDEN_CALL and "at::cpu::mm" in f.detail]
    assert native, [f.detail for f in report.findings]
    assert "gemm_ext" in native[0].detail, "the finding names the library it was found in"


def _refused_statically(report):
    return [f for f in report.findings if f.reason == Reason.STATIC_DYNAMIC and "native code is refused" in f.detail]


@needs_gxx
def test_an_honest_extension_is_refused_statically_and_passes_the_native_check_behind_it(
    tmp_path, timing_goal, monkeypatch
):
    """Every native build is refused by the source check (its library would
    run with the interpreter's full powers), honest or not; the native check stays behind it, tested here on what an
    honest build loads. Correctness and timing (the CPU stand-in, whose baseline blocks freeze the candidate: every
    freeze judges its processes' libraries): an extension that allocates with torch::empty and runs its own loop
    passes the native check (the stand-in's host-clock times mean nothing on a loaded machine, so timing findings are
    not the test). It was judged, once: both candidate processes mapped the one build in the eval's cache."""
    scans: list[NativeScan] = []
    init = NativeScan.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        scans.append(self)

    monkeypatch.setattr(NativeScan, "__init__", spy)
    solution = _write(tmp_path / "src", HONEST_AXPY)
    options = CPU_TIMING | SLOW | {"only": ["n256k"]}  # one timed shape: the build is most of the time
    report = eval_solution(solution, timing_goal, tmp_path / "runs", **options)
    assert not report.accepted and _refused_statically(report), [f.detail for f in report.findings]
    assert all(s.correct for s in report.shapes) and report.shapes
    assert not [f.detail for f in report.findings if f.reason == Reason.FORBIDDEN_CALL]
    assert any(s.candidate is not None for s in report.shapes), "the candidate was timed"
    (scan,) = scans
    built = [p for p in scan.judged if p.endswith("axpy_ext.so")]
    assert len(built) == 1 and built[0].endswith("torch_extensions/axpy_ext/axpy_ext.so"), scan.judged


def _launcher_outside_the_system(root, monkeypatch):
    """bwrap installed outside the system's directories, first on PATH, as the H200 machine has it (under /opt)."""
    found = shutil.which("bwrap")
    if found is None:
        pytest.skip("bwrap is not installed")
    copy = root / "opt" / "bwrap" / "bin" / "bwrap"
    copy.parent.mkdir(parents=True)
    shutil.copy2(found, copy)
    monkeypatch.setenv("PATH", f"{copy.parent}{os.pathsep}{os.environ['PATH']}")
    return copy


@pytest.mark.slow
def test_the_sandbox_launcher_is_trusted_by_identity_and_a_copy_of_it_is_judged(tmp_path, monkeypatch):
    launcher = _launcher_outside_the_system(tmp_path, monkeypatch)
    copy = tmp_path / "elsewhere" / "bwrap"
    copy.parent.mkdir()
    shutil.copy2(launcher, copy)
    scan = NativeScan.open(AXPY_FORBIDDEN, tmp_path / "work")
    for path in (launcher, copy):
        fd = os.open(path, os.O_RDONLY)
        try:
            scan.judge_file(str(path), fd)
        finally:
            os.close(fd)
    assert scan.judged == [str(copy)]
    assert scan.findings and all(str(copy) in f.detail for f in scan.findings), [f.detail for f in scan.findings]


def test_an_honest_eval_passes_the_native_check_with_bwrap_installed_outside_the_system(
    tmp_path, timing_goal, monkeypatch
):
    """The sandbox's processes (bwrap, then the candidate's interpreter) are scanned at every freeze: bwrap under
    /opt failed every honest kernel on the H200 with `forbidden_call` (its own mkdir, unlink, execvp)."""
    _launcher_outside_the_system(tmp_path, monkeypatch)
    solution = _write(
        tmp_path / "src", "import torch\n\n\ndef kernel(x, y, alpha):\n    return torch.addcmul(y, x, alpha)\n"
    )
    report = eval_solution(solution, timing_goal, tmp_path / "runs", **(CPU_TIMING | {"only": ["n256k"]}))
    assert report.isolation.sandbox == "bwrap"
    assert all(s.correct for s in report.shapes) and report.shapes
    assert not [f.detail for f in report.findings if f.reason == Reason.FORBIDDEN_CALL]


@pytest.mark.slow
def test_the_launchers_own_libraries_beside_it_are_trusted_and_a_copy_elsewhere_is_judged(tmp_path, monkeypatch):
    """A GPU host without bubblewrap's libraries gets them unpacked beside it and found through LD_LIBRARY_PATH: the
    launcher's process maps them, and judged as the candidate's code they failed every honest kernel on an H100
    (`forbidden_call`: libselinux's open and dlopen)."""
    launcher = _launcher_outside_the_system(tmp_path, monkeypatch)
    libs = tmp_path / "opt" / "bwrap" / "lib"
    libs.mkdir()
    needed = re.findall(
        r"=> (/\S+) \(0x", subprocess.run(["ldd", str(launcher)], capture_output=True, text=True).stdout
    )
    beside = [Path(shutil.copy2(p, libs)) for p in needed if "libc.so" not in p]
    if not beside:
        pytest.skip("this bwrap needs no library but libc")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(libs))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    copy = Path(shutil.copy2(beside[0], elsewhere))
    scan = NativeScan.open(AXPY_FORBIDDEN, tmp_path / "work")
    for path in (*beside, copy):
        fd = os.open(path, os.O_RDONLY)
        try:
            scan.judge_file(str(path), fd)
        finally:
            os.close(fd)
    assert scan.judged == [str(copy)], scan.judged


# The reader and the rules, on libraries built here with g++ (no torch): the symbols are ATen's own mangled names.

TENSOR = "namespace at { class Tensor { void* impl; }; }\n"
ALIAS = (
    TENSOR
    + """namespace at { namespace cpu { Tensor mm(const Tensor& a, const Tensor& b); } }
namespace q = at;
at::Tensor gemm(const at::Tensor& a, const at::Tensor& b) { return q::cpu::mm(a, b); }
"""
)
SPELLINGS = (
    TENSOR
    + """namespace at {
Tensor matmul(const Tensor& a, const Tensor& b);
namespace _ops { struct addmm { static Tensor call(const Tensor& c, const Tensor& a, const Tensor& b); }; }
namespace native { namespace cpublas { void gemm(int m, int n, int k); } }
}
#define CAT(x, y) x##y
using at::_ops::addmm;
at::Tensor by_adl(const at::Tensor& a, const at::Tensor& b) { return matmul(a, b); }
at::Tensor by_using(const at::Tensor& a, const at::Tensor& b) { return addmm::call(a, a, b); }
void by_macro() { CAT(a, t)::native::cpublas::gemm(1, 2, 3); }
"""
)
HONEST = (
    TENSOR
    + """namespace at {
class TensorBase { void* impl; public: template <typename T> T* data_ptr() const; long numel() const; };
extern template float* TensorBase::data_ptr<float>() const;
namespace _ops { struct empty_like { static Tensor call(const Tensor& self); }; }
}
at::Tensor scale(const at::TensorBase& x, const at::Tensor& like) {
    at::Tensor z = at::_ops::empty_like::call(like);
    float* p = x.data_ptr<float>();
    for (long i = 0; i < x.numel(); ++i) p[i] *= 2.0f;
    return z;
}
"""
)
CAPABILITIES = """#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
extern "C" void cublasSgemm_v2(void* handle, int a, int b);
extern "C" void sgemm_(const char* ta, const char* tb, const int* m);
void* by_name() { return dlsym(dlopen("libtorch_cpu.so", RTLD_NOW), "_ZN2at3cpu2mmERKNS_6TensorES3_"); }
void library() { cublasSgemm_v2(0, 1, 2); sgemm_("N", "N", 0); }
void* thread(pthread_t* t) { pthread_create(t, 0, 0, 0); return fopen("/tmp/x", "w"); }
"""
LOADER = """#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
void* by_name() { return dlsym(dlopen("libcuda.so.1", RTLD_NOW), "cuLaunchKernelEx"); }
void* thread(pthread_t* t) { pthread_create(t, 0, 0, 0); return fopen("/tmp/x", "w"); }
"""
"""What Triton's driver module and launchers do: libcuda's newer entry points looked up by name."""
INTERPOSED = """extern "C" void cublasSgemm_v2(int n) { (void)n; }
extern "C" __attribute__((visibility("hidden"))) void cblas_sgemm(int n) { (void)n; }
void calls(int n) { cublasSgemm_v2(n); cblas_sgemm(n); }
"""
"""A definition of its own under a library's name is bound by name (the loader searches the global scope first,
where torch put cuBLAS): refused. A hidden one is bound inside the library: it passes."""
WEAK_MM = (
    TENSOR
    + """namespace at { namespace cpu { __attribute__((weak)) Tensor mm(const Tensor& a, const Tensor& b); } }
extern "C" int has_mm() { return &at::cpu::mm != nullptr; }
"""
)
"""A library that loads without libtorch (a weak reference binds to nothing), for a live process to map."""
GEMM_FORBIDDEN = ["torch._scaled_mm", "torch.matmul", "torch.mm", "torch.Tensor.mm"]
AXPY_FORBIDDEN = ["torch.add", "torch.Tensor.add"]


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    """Each source above built once as a shared library (and a stand-in libcublas for one to need)."""
    import subprocess

    if GXX is None:
        pytest.skip("no C++ compiler (g++): native code cannot be built here")
    root = tmp_path_factory.mktemp("libs")

    def build(name: str, source: str, *flags: str):
        (root / f"{name}.cpp").write_text(source)
        out = root / f"lib{name}.so"
        cmd = [GXX, "-shared", "-fPIC", "-O1", "-o", str(out), str(root / f"{name}.cpp"), *flags]
        subprocess.run(cmd, check=True, capture_output=True)
        return out

    build("cublas", 'extern "C" void cublasCreate_v2() {}\n')
    sources = {"alias": ALIAS, "spellings": SPELLINGS, "honest": HONEST, "capabilities": CAPABILITIES}
    sources |= {"interposed": INTERPOSED, "weak_mm": WEAK_MM, "loader": LOADER}
    built = {name: build(name, src) for name, src in sources.items()}
    built["needs_cublas"] = build("needs_cublas", HONEST, f"-L{root}", "-Wl,--no-as-needed", "-lcublas")
    return built


def _problems(path, forbidden):
    from jg_mcp.eval.native.elf import read_elf
    from jg_mcp.eval.native.native_rules import Judge

    return Judge(forbidden).problems(read_elf(path.read_bytes()))


def test_the_reader_lists_what_the_loader_binds_by_name(libs):
    from jg_mcp.eval.native.elf import read_elf

    elf = read_elf(libs["needs_cublas"].read_bytes())
    assert "libcublas.so" in elf.needed and "libc.so.6" in elf.needed
    assert "_ZN2at4_ops10empty_like4callERKNS_6TensorE" in elf.bound
    assert "_ZNK2at10TensorBase8data_ptrIfEEPT_v" in elf.bound
    caps = read_elf(libs["capabilities"].read_bytes())
    assert {"dlopen", "dlsym", "pthread_create", "fopen", "cublasSgemm_v2", "sgemm_"} <= set(caps.bound)


def test_the_reader_ignores_section_headers_as_the_loader_does(libs):
    """The loader reads program headers and the dynamic segment only; wiping the section headers (which nm and
    readelf's symbol tables use) changes nothing the harness reads."""
    import struct

    from jg_mcp.eval.native.elf import read_elf

    data = bytearray(libs["alias"].read_bytes())
    struct.pack_into("<Q", data, 0x28, 0)  # e_shoff
    struct.pack_into("<HHH", data, 0x3A, 0, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    assert read_elf(bytes(data)) == read_elf(libs["alias"].read_bytes())


def test_what_is_not_a_loadable_elf_file_is_an_error_never_a_crash(libs):
    from jg_mcp.eval.native.elf import ElfError, read_elf

    data = libs["alias"].read_bytes()
    for bad in (b"", b"#!/bin/sh\n", data[:64], data[:4] + b"\x01" + data[5:], data[: len(data) // 3]):
        with pytest.raises(ElfError):
            read_elf(bad)


def test_an_aten_kernel_is_refused_however_the_source_spells_it(libs):
    (alias,) = _problems(libs["alias"], GEMM_FORBIDDEN)
    assert "at::cpu::mm" in alias and "_ZN2at3cpu2mmERKNS_6TensorES3_" in alias
    found = " | ".join(_problems(libs["spellings"], GEMM_FORBIDDEN))
    assert "at::matmul" in found, "argument-dependent lookup"
    assert "at::_ops::addmm::call" in found, "a using-declaration"
    assert "_ZN2at6native7cpublas4gemmEiii" in found, "a macro pasting the namespace"


def test_an_operator_the_goal_does_not_forbid_passes(libs):
    assert _problems(libs["alias"], AXPY_FORBIDDEN) == []
    assert _problems(libs["honest"], GEMM_FORBIDDEN) == []
    assert _problems(libs["honest"], AXPY_FORBIDDEN) == []


def test_libraries_loading_by_name_threads_and_files_are_refused(libs):
    found = " | ".join(_problems(libs["capabilities"], AXPY_FORBIDDEN))
    for name in ("dlopen", "dlsym", "cublasSgemm_v2", "sgemm_", "pthread_create", "fopen"):
        assert f"`{name}`" in found, name
    assert _problems(libs["needs_cublas"], AXPY_FORBIDDEN) == [
        "needs library `libcublas.so` (cuBLAS, cuDNN, BLAS and the like): write the kernel itself"
    ]


def test_a_definition_under_a_library_name_is_bound_by_name_unless_hidden(libs):
    (problem,) = _problems(libs["interposed"], AXPY_FORBIDDEN)
    assert "cublasSgemm_v2" in problem


def test_operator_names_are_read_from_every_spelling_of_aten():
    from jg_mcp.eval.native.native_rules import Judge

    axpy, gemm = Judge(AXPY_FORBIDDEN), Judge(GEMM_FORBIDDEN)
    assert "operator `add`" in axpy.symbol("_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE")
    assert "operator `add`" in axpy.symbol("aoti_torch_cpu_add_Tensor")
    assert "THPVariable_mm" in gemm.symbol("_ZN5torch8autograd14THPVariable_mmEP7_objectS2_S2_")
    kernel_in_template = "_ZN3c104impl28wrap_kernel_functor_unboxed_IXadL_ZN2at12_GLOBAL__N_114wrapper_CPU_mmEEEvv"
    assert "wrapper_CPU_mm" in gemm.symbol(kernel_in_template)
    assert gemm.symbol("_ZN2at4_ops4bmm_4callERKNS_6TensorE") is not None, "a family member (bmm)"
    for allowed in ("_ZN2at4_ops10empty_like4callERKNS_6TensorE", "_ZNK3c1010TensorImpl9is_mkldnnEv", "memcpy"):
        assert gemm.symbol(allowed) is None and axpy.symbol(allowed) is None, allowed
    assert gemm.symbol("_ZTIN5torch3jit12JITExceptionE") is None, "a type's identity is no code"
    assert "by name" in gemm.symbol("_ZN3c1010Dispatcher17findSchemaOrThrowEPKcS2_")


def _hold(lib):
    """A process that has `lib` mapped, waiting on its stdin."""
    import subprocess
    import sys

    code = f"import ctypes, sys; ctypes.CDLL({str(lib)!r}); print('up', flush=True); sys.stdin.read()"
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "up\n"
    return proc


@pytest.mark.skipif(os.geteuid() != 0, reason="/proc/PID/map_files opens only for root")
def test_a_running_process_has_its_mapped_library_judged_even_once_deleted(libs, tmp_path):
    """Read through /proc/PID/map_files: the inode that is mapped, whatever lies at its path now. The system's
    and this Python's own libraries are not judged."""
    lib = tmp_path / "elsewhere" / "libweak.so"
    lib.parent.mkdir()
    shutil.copyfile(libs["weak_mm"], lib)
    proc = _hold(lib)
    try:
        lib.unlink()
        scan = NativeScan.open(GEMM_FORBIDDEN, tmp_path / "work")
        scan.scan([proc.pid])
    finally:
        proc.kill()
        proc.wait()
    assert scan.judged == [str(lib)]
    (finding,) = scan.findings
    assert finding.reason == Reason.FORBIDDEN_CALL and str(lib) in finding.detail and "at::cpu::mm" in finding.detail
    assert not scan.by_path


def test_a_running_process_whose_library_calls_only_operators_the_goal_allows_passes(libs, tmp_path):
    proc = _hold(libs["weak_mm"])
    try:
        scan = NativeScan.open(AXPY_FORBIDDEN, tmp_path / "work")
        scan.scan([proc.pid])
        scan.scan([proc.pid])  # each freeze looks again: judged once
    finally:
        proc.kill()
        proc.wait()
    assert scan.findings == [] and scan.judged == [str(libs["weak_mm"])]


def test_without_map_files_libraries_are_read_at_their_path_and_the_cache_is_judged(libs, tmp_path):
    """The fallback where the harness is not root: the mapped file read at its path (checked to be the mapped
    inode), every ELF file in the eval's cache judged, and a deleted library a finding (it cannot be read)."""
    work = tmp_path / "work"
    (work / "cache" / "ext").mkdir(parents=True)
    shutil.copyfile(libs["capabilities"], work / "cache" / "ext" / "libcaps.so")
    (work / "cache" / "ext" / "notes.txt").write_text("not a library")
    held, gone = tmp_path / "libheld.so", tmp_path / "libgone.so"
    shutil.copyfile(libs["weak_mm"], held)
    shutil.copyfile(libs["weak_mm"], gone)
    procs = [_hold(held), _hold(gone)]
    try:
        gone.unlink()
        scan = NativeScan.open(GEMM_FORBIDDEN, work)
        scan.by_path = True
        scan.scan([p.pid for p in procs])
    finally:
        for p in procs:
            p.kill()
            p.wait()
    details = [f.detail for f in scan.findings]
    assert any(str(held) in d and "at::cpu::mm" in d for d in details), details
    assert any(str(gone) in d and "cannot be read" in d for d in details), details
    assert any("the eval's cache: ext/libcaps.so" in d and "`dlsym`" in d for d in details), details


def test_a_mapped_library_the_harness_cannot_open_is_a_finding_not_a_note(libs, tmp_path, monkeypatch):
    """Where the harness is not root the candidate runs as its uid, and can make a library it has mapped unreadable
    (`chmod 0` on its folder) before the scan: code the harness could not read is never passed as judged. Root
    reads through any mode, so the refusal the candidate would cause is made here by the open itself."""
    import jg_mcp.eval.native.native as native

    held = tmp_path / "closed" / "libheld.so"
    held.parent.mkdir()
    shutil.copyfile(libs["weak_mm"], held)
    real_open = os.open

    def refusing(path, *args, **kwargs):
        if str(path).endswith(str(held)):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    proc = _hold(held)
    try:
        scan = NativeScan.open(AXPY_FORBIDDEN, tmp_path / "work")
        scan.by_path = True
        monkeypatch.setattr(native.os, "open", refusing)
        scan.scan([proc.pid])
    finally:
        monkeypatch.undo()
        proc.kill()
        proc.wait()
    (finding,) = scan.findings
    assert str(held) in finding.detail and "cannot be read by the harness (Permission denied)" in finding.detail


def test_what_triton_builds_in_its_cache_may_load_by_name_but_never_calls_a_library(libs, tmp_path):
    """Triton's driver module and its kernels' launchers look libcuda's newer entry points up by name (dlopen,
    dlsym), and their bytes differ with Triton's version and each kernel's signature: in the Triton cache a library
    is judged by the library rules only. A library there that calls a forbidden operator or needs cuBLAS is still
    refused; the same library that loads by name, outside it, is refused for that."""
    work = tmp_path / "work"
    for name, where in [
        ("loader", work / "cache" / "triton" / "KEY" / "__triton_launcher.so"),
        ("alias", work / "cache" / "triton" / "KEY2" / "cuda_utils.so"),
        ("needs_cublas", work / "cache" / "triton" / "KEY3" / "cuda_utils.so"),
        ("loader", work / "cache" / "ext" / "libcaps.so"),
    ]:
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_bytes(libs[name].read_bytes())
    scan = NativeScan.open(GEMM_FORBIDDEN, work)
    scan.by_path = True
    scan.scan([])
    details = [f.detail for f in scan.findings]
    assert not any("KEY/__triton_launcher.so" in d for d in details), details
    assert any("triton/KEY2/cuda_utils.so" in d and "at::cpu::mm" in d for d in details), details
    assert any("triton/KEY3/cuda_utils.so" in d and "cublas" in d.lower() for d in details), details
    assert any("ext/libcaps.so" in d and "`dlsym`" in d for d in details), details


@pytest.mark.parametrize(
    "name",
    [
        "cuLaunchKernelEx",
        "cuModuleLoadData",
        "cuTensorMapEncodeTiled",
        "cuOccupancyMaxActiveClusters",
        "PyArg_ParseTuple",
    ],
)
def test_the_cuda_driver_and_python_entry_points_a_launcher_binds_pass(name):
    """Triton's driver module and launchers bind the CUDA driver API (TMA descriptors on Hopper included:
    cuTensorMapEncodeTiled is not cuTENSOR) and the Python C API: never a library kernel."""
    from jg_mcp.eval.native.native_rules import Judge

    assert Judge(GEMM_FORBIDDEN).symbol(name, libraries_only=True) is None
    assert Judge(GEMM_FORBIDDEN).symbol("cutensorContract", libraries_only=True)
