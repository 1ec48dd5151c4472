"""Native code in the candidate's processes, judged from outside them by what was built and loaded, not by its text.

The static policy reads a native source's text, and `namespace q = at;`, argument-dependent lookup, a
using-declaration or a macro spells a library call without the text it looks for. What the dynamic loader binds
cannot be spelt otherwise: every call from a library into another goes through a symbol named in its dynamic
symbol table. So the harness reads, from /proc, the executable file mappings of every process of the candidate's
tree at points where they are stopped or done (each freeze while a baseline is timed, and the end of each candidate
process), and judges every library that is not the system's or this Python environment's (anything under the eval's
cache, the sandbox's /tmp, a memfd or a deleted file). The sandbox's own launcher (the bwrap executable the harness
runs, wherever it was installed: under /opt on the H200 machine) is trusted by its identity, the file itself, not by
where it lies: a copy of it is judged like any library. It reads the file through /proc/PID/map_files (the inode
that is mapped, whatever now lies at its path), parses it as the loader does (program headers, the dynamic segment,
the symbols its relocations bind by name) and refuses:

- an ATen operator the goal forbids, with its whole family (`jg_mcp.eval.ops`): any mangled name in `at::` or
  `torch::` naming it (at::_ops::mm::call, at::cpu::mm, at::native::..., Tensor::mm, a kernel in a template
  argument) and the AOTInductor C shims (`aoti_torch_cpu_mm_out`);
- a library kernel: cuBLAS(Lt), cuDNN, cuSPARSE, cuFFT, BLAS, MKL, oneDNN, FBGEMM, XNNPACK, CUTLASS, by symbol or by
  the library it needs;
- what cannot be judged: code loaded or looked up by name (dlopen, dlsym, the dispatcher's operator handles,
  TorchScript, Python imports and code run from text), and, as the source policy refuses them in Python, threads and
  processes, files, executable memory and raw system calls.

Allocation, sizes, data pointers, streams and its own kernels pass (at::_ops::empty*, TensorBase methods, c10).
What Triton builds in the candidate's Triton cache (its driver module `cuda_utils` and the kernels' launchers) loads
libcuda's newer entry points by name (dlopen, dlsym), and differs with Triton's version and each kernel's signature:
a library there is judged by the first two rules only (no forbidden operator, no library kernel). So a candidate's
own library placed in its Triton cache may load code by name unjudged: a known gap, narrower than the source text's.

What this cannot see: native code that finds a function without naming it (walking memory from an allowed
function to its library's symbol table), code it writes into anonymous memory or loads by raw system calls, calls
it makes back into Python (pybind11's own attribute lookups are those of any extension), a library rewritten in
place after it was loaded, and library code compiled into its own (CUTLASS or cuBLASDx templates). The red team's
`namespace q = at;` is no longer among them.
"""

from __future__ import annotations

import os
import re
import stat
import struct
import subprocess
from pathlib import Path

from jg_mcp.eval.native.elf import read_elf
from jg_mcp.eval.native.native_rules import Judge
from jg_mcp.eval.processes.isolation import CACHE_DIR, launcher, python_binds
from jg_mcp.eval.processes.proctree import CodeMapping, code_mappings
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import Finding
from jg_mcp.live.sandbox import SYSTEM_DIRS

MAX_LIBRARY_BYTES = 256 << 20
"""The largest library the harness reads; a larger one is not judged (a finding). The candidate's processes can
write no larger file (`jg_mcp.eval.candidate.worker.MAX_FILE_BYTES`)."""
MAX_CACHE_FILES = 20000
"""Files of the eval's cache looked at when libraries are judged by path (`NativeScan.by_path`)."""
BY_PATH = (
    "reading the candidate's mapped code through /proc/PID/map_files (it needs root): its native libraries were "
    "read at their paths and every ELF file in the eval's cache was judged; code mapped from a deleted file or a "
    "memfd could not be read (a finding)"
)
"""The note `isolation.missing` carries when the harness judged native code by path."""


def trusted_roots() -> list[str]:
    """Where this host's own code lies, read-only in the candidate's sandbox: the system's directories and this
    Python environment's (the sandbox's binds)."""
    return [d for d in SYSTEM_DIRS if os.path.isdir(d)] + [str(p) for p in python_binds()]


def launcher_libraries() -> list[str]:
    """The libraries the dynamic loader maps for the sandbox's launcher in this environment (`ldd`, which the loader
    answers for a binary the harness trusts already), as paths: trusted by their identity like the launcher."""
    try:
        done = subprocess.run(["ldd", launcher()], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [m.group(1) for m in re.finditer(r"=> (/\S+) \(0x", done.stdout)]


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class NativeScan:
    """The native code of one eval's candidate processes: `scan(pids)` judges every library mapped as code in those
    processes (stopped, or done) that is not this host's own; each problem is a `forbidden_call` finding, kept in
    `findings` for the report. A file is read and judged once per version (its inode, size and times)."""

    def __init__(self, forbidden: list[str], work: Path, roots: list[str], launcher: set[tuple[int, int]]):
        self.judge = Judge(forbidden)
        self.work = str(work.resolve())
        self.cache = work / "cache"
        self.roots = roots
        """Where this host's own code lies (`trusted_roots`)."""
        self.launcher = launcher
        """The device and inode of the bwrap executable that starts the sandbox, whose processes are scanned too, and
        of the libraries the loader gives it here (a GPU host may have them beside it, through LD_LIBRARY_PATH)."""
        self.tritons = [f"{CACHE_DIR}/triton", str((work / "cache" / "triton").resolve())]
        """The candidate's Triton cache, as its sandbox and as this host see it: what is there is judged by the
        library rules only (see the module docstring)."""
        self.verdicts: dict[tuple[int, ...], list[str]] = {}
        self.findings: list[Finding] = []
        self.judged: list[str] = []
        """The libraries judged, as their processes see them (or the cache's files, by path), in order."""
        self.by_path = False
        """Set once /proc/PID/map_files cannot be opened (the harness is not root): libraries are then read at their
        paths (checked against the mapping's device and inode) and every ELF file in the eval's cache is judged."""

    @classmethod
    def open(cls, forbidden: list[str], work: Path) -> NativeScan:
        """The judge of one eval's native code in `work`, with this host's own code found first (its directories,
        the sandbox's launcher and the libraries `ldd` says the loader maps for it)."""
        launchers = (_identity(launcher()), *map(_identity, launcher_libraries()))
        return cls(forbidden, work, trusted_roots(), {i for i in launchers if i is not None})

    def scan(self, pids: list[int]) -> None:
        for pid in pids:
            try:
                mappings = code_mappings(pid)
            except OSError as exc:
                self.add(f"process {pid}", f"its memory map cannot be read ({exc.strerror}): its code cannot be judged")
                continue
            for m in mappings or []:
                if m.deleted or _under(m.path, self.work) or not any(_under(m.path, r) for r in self.roots):
                    self.judge_mapping(m)
        if self.by_path:
            self.judge_cache()

    def judge_mapping(self, m: CodeMapping) -> None:
        try:
            fd = self.open_mapped(m)
        except OSError as exc:
            if not os.path.exists(f"/proc/{m.pid}/maps"):
                return  # the process is gone (killed from outside while stopped): it runs nothing any more
            # a file the candidate made unreadable (its own uid when the harness is not root), or a kernel whose
            # /proc tells mappings otherwise: code the harness cannot read is never passed as judged
            self.add(m.path, f"cannot be read by the harness ({exc.strerror or exc}): its code cannot be judged")
            return
        try:
            self.judge_file(m.path, fd, any(_under(m.path, root) for root in self.tritons))
        finally:
            os.close(fd)

    def open_mapped(self, m: CodeMapping) -> int:
        """The mapped file itself: through /proc/PID/map_files (root), else at its path inside the process's root,
        which must be the mapped inode."""
        if not self.by_path:
            try:
                return os.open(f"/proc/{m.pid}/map_files/{m.range}", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:  # not root, or a kernel without map_files (gVisor): read at the path, checked
                self.by_path = True
        if m.deleted:
            raise OSError(0, "deleted or a memfd, and /proc/PID/map_files cannot be opened here")
        fd = os.open(f"/proc/{m.pid}/root{m.path}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        st = os.fstat(fd)
        if (st.st_ino, f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}") != (m.inode, m.device):
            os.close(fd)
            raise OSError(0, "the file at its path is not the one mapped")
        return fd

    def judge_file(self, shown: str, fd: int, tritons: bool = False) -> None:
        st = os.fstat(fd)
        if stat.S_ISCHR(st.st_mode):
            return  # a device's memory (a GPU driver's): no candidate can make a device node
        if not stat.S_ISREG(st.st_mode):
            self.add(shown, "is not a regular file: its code cannot be judged")
            return
        if (st.st_dev, st.st_ino) in self.launcher:
            return
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, tritons)
        if key not in self.verdicts:
            self.verdicts[key] = self.verdict(fd, st.st_size, tritons)
            self.judged.append(shown)
        for problem in self.verdicts[key]:
            self.add(shown, problem)

    def verdict(self, fd: int, size: int, tritons: bool) -> list[str]:
        if size > MAX_LIBRARY_BYTES:
            return [f"is {size >> 20} MiB, more than the harness reads: its code cannot be judged"]
        chunks, offset = [], 0
        while offset <= MAX_LIBRARY_BYTES and (chunk := os.pread(fd, 1 << 22, offset)):
            chunks.append(chunk)
            offset += len(chunk)
        data = b"".join(chunks)
        try:
            return self.judge.problems(read_elf(data), libraries_only=tritons)
        except (ValueError, struct.error) as exc:  # the boundary of untrusted bytes: ElfError, and what it missed
            return [f"is no ELF file the loader could map that the harness can read ({exc}): it cannot be judged"]

    def judge_cache(self) -> None:
        """Every ELF file in the eval's cache (by path: what a process mapped from there but deleted since, or
        before the harness looked, is among them unless it is gone)."""
        seen = 0
        for folder, _, files in os.walk(self.cache):
            for file in files:
                seen += 1
                if seen > MAX_CACHE_FILES:
                    return
                path = os.path.join(folder, file)
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    continue
                try:
                    if stat.S_ISREG(os.fstat(fd).st_mode) and os.pread(fd, 4, 0) == b"\x7fELF":
                        where = os.path.relpath(path, self.cache)
                        self.judge_file(f"the eval's cache: {where}", fd, where.startswith("triton/"))
                finally:
                    os.close(fd)

    def add(self, where: str, problem: str) -> None:
        detail = f"native code {where}: {problem}"
        if all(f.detail != detail for f in self.findings):
            self.findings.append(Finding(reason=Reason.FORBIDDEN_CALL, detail=detail))
