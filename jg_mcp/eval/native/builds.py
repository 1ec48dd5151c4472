"""What a candidate builds: its files placed in the eval's work directory, its native build kept between evals of
the very same sources, and whether it compiled a GPU kernel of its own at all. All of it runs in the harness, on
the host, before the candidate's processes get the files or after they have ended."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from jg_mcp.eval.native.sources import SourceFile
from jg_mcp.eval.processes.compile_cache import copy_build, extensions_dir
from jg_mcp.eval.report import SourceRecord

SOURCE_TIME = 946684800
"""The modification time of every copied source file (2000-01-01): the same in every eval, so a kept build of the
same sources (`restore`) is older than nothing it was built from, and torch's builder (ninja, which compares times)
does not build it again; sources that differ in content have another key, and so another build."""
KERNEL_FILES = (".cubin", ".hsaco", ".cuda.o", ".fatbin")
"""What compiling a GPU kernel leaves in the eval's cache: Triton's `.cubin` (`.hsaco` on ROCm), and the device code
objects torch's extension builder has nvcc make (`NAME.cuda.o`) or a build makes by hand (`.fatbin`)."""


def place(files: list[SourceFile], solution_dir: Path) -> None:
    """Write the solution's files into `solution_dir`: every other file at its workspace-relative path, then the main
    file as `solution.py` (what the worker imports, and what the report names: last, so that a workspace's own
    `solution.py` beside another main file never takes its place), each at SOURCE_TIME."""
    solution_dir.mkdir(exist_ok=True)  # a spare set's work holds it already
    for i in [*range(1, len(files)), 0]:
        file = files[i]
        path = solution_dir / ("solution.py" if i == 0 else file.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(file.data)
        os.utime(path, (SOURCE_TIME, SOURCE_TIME))


def build_key(torch_version: str, gpu: str | None, sources: list[SourceRecord]) -> str:
    """What a kept build is found by: torch's version, the GPU and every source file's path and hash."""
    parts = [torch_version, gpu or "cpu", *(f"{s.path} {s.sha256}" for s in sources)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


UNFINISHED = "lock"
"""The file torch's extension builder holds in an extension's build directory while it builds (its `FileBaton`) and
removes when the build ends. A build cut off (an eval's timeout, a crash) leaves it, and a later build of the same
extension waits on it for ever: kept and restored, it made every later eval of the same sources time out."""


def unfinished(builds: Path) -> bool:
    """Whether a build in `builds` (one directory per extension) was cut off before it ended."""
    return any(builds.glob(f"*/{UNFINISHED}"))


def restore(key: str, builds: Path, owner: int | None) -> Path | None:
    """Put the build kept under `key` (`compile_cache.extensions_dir`) into `builds`, where the candidate's torch
    builds, owned by `owner`; returns where this eval's build is to be kept (`keep`), or None where that directory
    cannot be trusted. A kept build that was cut off is dropped: this eval builds anew."""
    kept = extensions_dir(key)
    if kept is not None and unfinished(kept):
        shutil.rmtree(kept, ignore_errors=True)
        kept = extensions_dir(key)
    if kept is not None and any(kept.iterdir()):
        copy_build(kept, builds, owner)
    return kept


def keep(builds: Path, kept: Path | None) -> None:
    """Keep what the candidate's sandbox built in `builds` for the next eval of the same sources (`restore`), unless
    its build was cut off."""
    if kept is not None and builds.is_dir() and any(builds.iterdir()) and not unfinished(builds):
        shutil.rmtree(kept, ignore_errors=True)
        copy_build(builds, kept)


def compiled_a_kernel(cache: Path, most: int = 100_000) -> bool:
    """Whether the candidate's processes compiled a GPU kernel (KERNEL_FILES) into the eval's own cache (Triton's and
    torch's extension builds), made empty for this eval or holding only the kept build of these very sources, which
    every kernel a candidate launches passes through: read on the host once they have ended, where no candidate code
    runs, looking at no more than `most` entries (no links followed). A floor, not proof of work: a candidate can
    compile a kernel it does not use."""
    seen = 0
    for _, dirs, files in os.walk(cache):
        if any(f.endswith(KERNEL_FILES) for f in files):
            return True
        seen += len(dirs) + len(files)
        if seen > most:
            return True  # too many entries to read: not judged, rather than a rejection by count
    return False
