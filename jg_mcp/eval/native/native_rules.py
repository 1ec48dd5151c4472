"""The rules native code is judged by (jg_mcp.eval.native.native reads it from the candidate's processes): what a
library's dynamic symbols and needed libraries may name. Refused: a forbidden ATen operator under any spelling, a
library kernel (cuBLAS, cuDNN, BLAS, ...), and, but in the Triton cache, code loaded by name, threads and processes,
files, executable memory and raw system calls."""

from __future__ import annotations

import re

from jg_mcp.eval.native.elf import Elf
from jg_mcp.eval.ops import FAMILIES, forbidden_ops, in_family

MAX_PROBLEMS = 8
"""Problems named per library; more are counted."""
DYNAMIC_CODE = {
    "dlopen",
    "dlmopen",
    "dlsym",
    "dlvsym",
    "dlclose",
    "dlinfo",
    "dladdr",
    "dladdr1",
    "dl_iterate_phdr",
    "_r_debug",
    "_dl_sym",
    "_dl_vsym",
    "_dl_open",
    "__libc_dlopen_mode",
    "__libc_dlsym",
    "__libc_dlvsym",
}
PYTHON_CODE = re.compile(r"PyImport_|PyRun_|Py_CompileString|PyEval_EvalCode|PyMarshal_ReadObjectFrom")
CONCURRENCY = {
    "pthread_create",
    "fork",
    "vfork",
    "clone",
    "clone3",
    "execve",
    "execv",
    "execvp",
    "execvpe",
    "execl",
    "execlp",
    "execle",
    "fexecve",
    "posix_spawn",
    "posix_spawnp",
    "system",
    "popen",
}
FILES = {
    "open",
    "open64",
    "openat",
    "openat64",
    "__open_2",
    "__open64_2",
    "__openat_2",
    "creat",
    "creat64",
    "fopen",
    "fopen64",
    "freopen",
    "freopen64",
    "rename",
    "renameat",
    "renameat2",
    "unlink",
    "unlinkat",
    "truncate",
    "truncate64",
    "ftruncate",
    "ftruncate64",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "mkdir",
    "mkdirat",
    "mkfifo",
    "mknod",
}
MEMORY = {
    "mmap",
    "mmap64",
    "munmap",
    "mprotect",
    "pkey_mprotect",
    "mremap",
    "memfd_create",
    "syscall",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
}
LIBRARIES: tuple[str, ...] = ("blas", "cpublas", "cublas", "cudnn", "cusparse", "cufft", "mkl", "dnnl", "onednn")
LIBRARIES += ("fbgemm", "xnnpack", "cutlass", "openblas", "cblas", "cutensor", "magma", "miopen")
"""Library kernels: in a C name or a needed library's name anywhere (cublasSgemm_v2, scipy_cblas_sgemm64_,
libcudnn.so.9), in a C++ name as how one of its scopes or its own name starts (any case, leading underscores aside:
at::cuda::blas::gemm, at::native::cpublas::gemm, at::native::mkldnn_matmul, dnnl::matmul). A C++ name that only
mentions one (c10::TensorImpl::is_mkldnn) passes."""
C_LIBRARY = re.compile(
    r"xnn_\w*"
    r"|[sdczh](?:gemm(?:3m|t|_batch\w*)?|gemv|axpy|dotc?|dotu|ger[cu]?|symm|hemm|syrk|herk|syr2k|her2k|trmm|trsm)_?"
)
"""C and Fortran entry points of BLAS and XNNPACK without a library's prefix (sgemm_, daxpy, xnn_run_operator)."""
CXX_THREADS = {("std", "thread")}
CXX_FILES = {("std", "basic_filebuf"), ("std", "basic_ofstream"), ("std", "basic_ifstream"), ("std", "basic_fstream")}
CXX_FILES |= {("std", "filesystem")}
BY_HANDLE = {("c10", "Dispatcher"), ("c10", "OperatorHandle"), ("torch", "jit")}
"""The dispatcher's own API and TorchScript: an operator called by handle or name, or code compiled from text."""


_LENGTH = re.compile(r"[0-9]{1,5}")


def _names(mangled: str, i: int) -> list[str]:
    """The run of source names (`<length><identifier>`) of a mangled symbol from position `i`, ABI tags skipped."""
    parts = []
    while m := _LENGTH.match(mangled, i):
        i = m.end() + int(m.group())
        parts.append(mangled[m.end() : i])
        while mangled.startswith("B", i) and (tag := _LENGTH.match(mangled, i + 1)):
            i = tag.end() + int(tag.group())  # an ABI tag (B5cxx11) names no scope
    return parts


def own_name(mangled: str) -> list[str]:
    """The components of an Itanium-mangled symbol's own name, up to its template arguments
    (`_ZN2at4cuda4blas4gemmIfEEv...` is at, cuda, blas, gemm; `_ZNSt6thread...` std, thread); empty for a name
    that is not mangled or starts otherwise (a special name: vtables, typeinfo, guards)."""
    if not mangled.startswith("_Z"):
        return []
    i = 2
    if mangled.startswith("N", i):
        i += 1
        while i < len(mangled) and mangled[i] in "rVKRO":  # a method's qualifiers
            i += 1
    if mangled.startswith("St", i):
        return ["std", *_names(mangled, i + 2)]
    return _names(mangled, i)


def nested_paths(mangled: str) -> list[list[str]]:
    """Every qualified name in namespace `at` or `torch` spelt in an Itanium-mangled symbol, as its components:
    the symbol's own (`_ZN2at3cpu2mmE...` is at::cpu::mm) and any in its template arguments (a kernel passed as a
    template argument is spelt there)."""
    return [_names(mangled, m.start()) for m in re.finditer(r"(?<![0-9])(?:2at|5torch)(?=[0-9])", mangled)]


class Judge:
    """The rules for the symbols and libraries of a candidate's native code, for one goal's forbidden list."""

    def __init__(self, forbidden: list[str]):
        ops = forbidden_ops(forbidden)
        self.ops = {op.strip("_").lower() for op in ops}
        self.members = {op for family in FAMILIES for op in family if op in ops}

    def operator(self, name: str) -> str | None:
        """The forbidden operator a name (a scope's or a function's) names: a run of its words (split at `_`:
        `mm_out`, `add_Tensor`, `wrapper_CPU_mm`) that the goal forbids, or a relative of a family member."""
        words = [w for w in name.lower().split("_") if w]
        for i in range(len(words)):
            for j in range(i + 1, min(i + 8, len(words)) + 1):  # an operator's name has a few words
                if "_".join(words[i:j]) in self.ops:
                    return "_".join(words[i:j])
        return name if in_family(name, self.members, camel=False) else None

    def symbol(self, name: str, libraries_only: bool = False) -> str | None:
        """Why a symbol the loader binds is refused, or None; with `libraries_only`, only for a library kernel or a
        forbidden operator (Triton's own builds: see the module docstring)."""
        if name.startswith(("_ZTI", "_ZTS")):
            return None  # a type's identity (what exceptions and dynamic_cast compare): no code
        shown = name if len(name) <= 160 else name[:160] + "..."
        own = own_name(name)
        scope = tuple(own[:2])
        if not libraries_only and (why := self.unjudgeable(name, scope)):
            return f"uses `{shown}`: {why}"
        if name.startswith("_Z"):
            library = any(n.lstrip("_").lower().startswith(LIBRARIES) for n in own)
        else:
            low = name.lower().replace("cutensormap", "tensormap")  # the driver's TMA descriptors, not cuTENSOR
            library = any(w in low for w in LIBRARIES) or bool(C_LIBRARY.fullmatch(name))
        if library:
            return f"calls library `{shown}` (cuBLAS, cuDNN, BLAS and the like): write the kernel itself"
        for path in nested_paths(name):
            for part in path[1:]:
                if op := self.operator(part):
                    return f"calls ATen `{'::'.join(path)}` ({shown}): operator `{op}` is forbidden by the goal"
        if name.startswith("aoti_torch_") and (op := self.operator(name.removeprefix("aoti_torch_"))):
            return f"calls ATen's C shim `{shown}`: operator `{op}` is forbidden by the goal"
        return None

    @staticmethod
    def unjudgeable(name: str, scope: tuple[str, ...]) -> str | None:
        """Why a symbol makes native code unjudgeable or does what the source policy refuses, or None."""
        if name in DYNAMIC_CODE or PYTHON_CODE.match(name) or scope in BY_HANDLE:
            return "code loaded, looked up or called by name cannot be judged"
        if name in CONCURRENCY or scope in CXX_THREADS:
            return "native code may not start threads or processes (nor may the source)"
        if name in FILES or scope in CXX_FILES:
            return "native code may not open or write files (nor may the source)"
        if name in MEMORY:
            return "code it maps or makes, or raw system calls, cannot be judged"
        return None

    def library(self, name: str) -> str | None:
        """Why a library it needs is refused, or None."""
        low = name.lower()
        if any(w in low for w in LIBRARIES):
            return f"needs library `{name}` (cuBLAS, cuDNN, BLAS and the like): write the kernel itself"
        stem = re.split(r"\.so\b", low.removeprefix("lib"))[0]
        if op := self.operator(re.sub(r"[^a-z0-9]+", "_", stem)):
            return f"needs library `{name}`: `{op}` is forbidden by the goal"
        return None

    def problems(self, elf: Elf, libraries_only: bool = False) -> list[str]:
        """Why the file is refused (at most MAX_PROBLEMS named, the rest counted); empty when it passes."""
        if not elf.dynamic:
            return ["is statically linked: library code linked into it cannot be told from its own"]
        bound = [self.symbol(name, libraries_only) for name in elf.bound]
        found = [p for p in map(self.library, elf.needed) if p] + [p for p in bound if p]
        if len(found) > MAX_PROBLEMS:
            found = [*found[:MAX_PROBLEMS], f"and {len(found) - MAX_PROBLEMS} more refused symbols"]
        return found
