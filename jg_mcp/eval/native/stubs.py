"""Libraries a goal forbids, made unusable inside the candidate's sandbox: each real file is covered (bind-mounted
read-only) by a stub with the same soname and symbol versions whose every function returns an error status (and
whose string getters return a constant string: a stub returning an integer where a pointer is expected crashes its
caller instead of failing it).

Why by what runs: a GEMM reaches cuBLAS through torch.matmul, F.linear, the @ operator, einsum, an embedding bag's
per-sample weights, a transformer layer, native code's at::mm or cublasGemmEx, or a library loaded by a path. No
reading of source or symbols names every one of these; with the library's functions all failing, none works, and
torch imports and runs everything else (measured on an H100 with torch 2.11: `x @ x` and F.linear failed with
CUBLAS_STATUS_NOT_SUPPORTED, softmax and Triton kernels ran). Kernels compiled into libtorch itself (the CUTLASS
GEMMs behind _scaled_mm and _grouped_mm, SDPA) are not in these files: docs/threat-model.md says what catches them.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from jg_mcp.errors import JgError
from jg_mcp.eval.ops import forbidden_ops

GEMM_OPS = frozenset({"mm", "matmul", "_scaled_mm", "linear", "bmm", "addmm", "einsum"})
"""Operators any of which a goal forbids means: no cuBLAS in the candidate's sandbox."""
LIBRARY_NAMES = re.compile(r"^libcublas(Lt)?\.so(\.\d+)*$")
"""The files stubbed for such a goal: cuBLAS and cuBLASLt, every version found."""
SEARCHED = ("/usr/local/cuda*/lib64", "/usr/local/cuda*/targets/*/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64")
"""System directories searched for copies of those libraries besides the ones this process has loaded."""
ERROR_STATUS = 15
"""What every stubbed function returns: CUBLAS_STATUS_NOT_SUPPORTED, an error every caller checks for."""


def forbids_gemm(forbidden: list[str]) -> bool:
    """Whether a goal's forbidden list (with its operator families) forbids a GEMM, and so cuBLAS."""
    return bool(forbidden_ops(forbidden) & GEMM_OPS)


def library_files(extra_dirs: list[str] | None = None) -> list[Path]:
    """Every cuBLAS and cuBLASLt file this process has mapped and every one in the system's library directories
    (`extra_dirs` too), resolved to the real files: each is what the sandbox must cover."""
    dirs: set[str] = set(extra_dirs or [])
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        maps = ""
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if LIBRARY_NAMES.match(os.path.basename(path)):
            dirs.add(os.path.dirname(path))
    for pattern in SEARCHED:
        dirs.update(glob.glob(pattern))
    found: set[Path] = set()
    for d in dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            if LIBRARY_NAMES.match(name):
                real = Path(d, name).resolve()
                if real.is_file():
                    found.add(real)
    return sorted(found)


def _exports(library: Path) -> dict[str, str | None]:
    """The functions `library` defines, each with its symbol version (None: unversioned), read by `nm -D`."""
    done = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise JgError(f"cannot read the symbols of {library} to stub it: {done.stderr.strip()[-300:]}")
    funcs: dict[str, str | None] = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[1] not in "TtWi":
            continue
        name, version = parts[2], None
        if "@" in name:
            name, _, version = name.partition("@")
            version = version.lstrip("@") or None
        if re.fullmatch(r"[A-Za-z_]\w*", name):
            funcs[name] = version
    return funcs


def _soname(library: Path) -> str:
    done = subprocess.run(["objdump", "-p", str(library)], capture_output=True, text=True, timeout=60, check=False)
    found = re.search(r"^\s*SONAME\s+(\S+)", done.stdout, re.MULTILINE)
    return found.group(1) if found else library.name


def stub_source(funcs: dict[str, str | None]) -> tuple[str, str]:
    """The C source of a stub defining `funcs`, and its linker version script (every version node the real library
    has, each function under its own, an unversioned one under the first)."""
    lines = []
    for name in sorted(funcs):
        if re.search(r"String|Name", name):
            lines.append(f'const char* {name}(void) {{ return "stubbed: this library is forbidden by the goal"; }}\n')
        else:
            lines.append(f"int {name}(void) {{ return {ERROR_STATUS}; }}\n")
    versions = sorted({v for v in funcs.values() if v})
    if not versions:
        return "".join(lines), "{ global: *; };\n"
    nodes = {v: [f for f, fv in funcs.items() if fv == v or (fv is None and v == versions[0])] for v in versions}
    script = "".join(f"{v} {{ global: {' '.join(n + ';' for n in sorted(names))} }};\n" for v, names in nodes.items())
    return "".join(lines), script


def stub_for(library: Path, cache: Path) -> Path:
    """The stub of `library`, built once per file (by its path, size and time) under `cache`."""
    st = library.stat()
    key = hashlib.sha256(f"{library}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:24]
    stub = cache / key / library.name
    if stub.is_file():
        return stub
    if not (shutil.which("cc") and shutil.which("nm") and shutil.which("objdump")):
        raise JgError("cc, nm and objdump are needed to stub the libraries a goal forbids (binutils, gcc)")
    work = cache / f"{key}.tmp{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    source, script = stub_source(_exports(library))
    (work / "stub.c").write_text(source)
    (work / "stub.map").write_text(script)
    built = subprocess.run(
        ["cc", "-shared", "-fPIC", "-O0", "-o", str(work / library.name), str(work / "stub.c")]
        + [f"-Wl,--version-script={work / 'stub.map'}", f"-Wl,-soname,{_soname(library)}"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if built.returncode != 0:
        raise JgError(f"cannot build the stub of {library}: {built.stderr.strip()[-400:]}")
    (work / library.name).chmod(0o755)
    try:
        os.replace(work, cache / key)
    except OSError:  # another eval built the same stub meanwhile
        shutil.rmtree(work, ignore_errors=True)
    return stub


def stub_binds(libraries: list[Path], cache: Path) -> list[tuple[Path, Path]]:
    """(stub, real file) for each of `libraries`: what the candidate's sandbox binds read-only over the real ones."""
    return [(stub_for(lib, cache), lib) for lib in libraries]
