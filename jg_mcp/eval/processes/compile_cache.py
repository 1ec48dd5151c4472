"""Where the baselines' compiled kernels are kept: one directory per user, torch, Triton and GPU, outside every
directory the candidate can write, shared by every eval that matches it (and by `eval/h200_check.py`'s do_bench).

Trust: a baseline process reads nothing the candidate can write. Its Triton and Inductor caches used to be the
eval's compile cache, which is bound writable into the candidate's sandbox, so a candidate could plant a slow
kernel under the hash of a baseline's and be measured against it.

Reproducibility: torch.compile autotunes some kernels when they first run, and at 8-20 us shapes the pick is
noise, so two processes compiled two different baselines (0.0080 and 0.0108 ms for the same call on the H200).
With one cache, the first compilation on a host is the baseline every later eval there measures; its place is
in the report (`environment.baseline_cache`), and deleting it recompiles. Across hosts a cache does not help, so
the goals compile their baselines with Inductor's pointwise autotuning off (`options={"triton.autotune_pointwise":
False}`): each pointwise kernel keeps Inductor's first config. In three fresh processes each on the H200
(docs/decisions/2026-12-02-pointwise-autotune-off.md) swiglu's decode baseline took 0.0195, 0.0161 and 0.0162 ms
autotuned and 0.0162 ms all three times without; rope's decode_bs256 0.0095-0.0107 ms against 0.0092-0.0094 ms.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import stat
import sys
from pathlib import Path


def root() -> Path:
    """`$JG_MCP_CACHE`, else `$XDG_CACHE_HOME/jg-mcp`, else `~/.cache/jg-mcp`."""
    if given := os.environ.get("JG_MCP_CACHE"):
        return Path(given)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "jg-mcp"


def _private_dir(path: Path, mode: int = 0o700) -> str | None:
    """Make `path` (and missing parents) as this user's directory (`mode`, 0700 unless told); None when it is one
    no other user can write, else what is wrong: a directory another user owns or can write, or a link, could hand
    the baselines someone else's kernels."""
    try:
        path.mkdir(mode=mode, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot make {path}: {exc.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.geteuid():
        return f"{path} belongs to uid {st.st_uid}"
    if st.st_mode & 0o022:
        return f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def baseline_dir(torch_version: str, triton_version: str, gpu: str | None, fallback: Path) -> tuple[Path, str | None]:
    """The baselines' cache for this torch, Triton and GPU, and None; or, where that directory cannot be trusted,
    `fallback` (the eval's own: compiled anew, not pinned) and the reason."""
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "_", f"torch-{torch_version}_triton-{triton_version}_{gpu or 'cpu'}")
    path = root() / "baselines" / slug
    problem = _private_dir(path)
    if problem is None:
        return path, None
    fallback.mkdir(mode=0o700, exist_ok=True)
    return fallback, problem


def baseline_env(path: Path) -> dict[str, str]:
    """The environment that points torch.compile (Inductor) and Triton at `path`."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(path / "inductor"), "TRITON_CACHE_DIR": str(path / "triton")}


def bytecode_dir() -> Path | None:
    """Where the eval's workers keep Python's bytecode of what they import (torch, Triton, the harness), or None
    where torch has bytecode of its own: `root()/bytecode/<cache tag>`, or None too where that directory cannot be
    trusted.

    Some images install torch without bytecode and set PYTHONDONTWRITEBYTECODE; each worker then compiles torch's
    sources anew: on the H200 `import torch._dynamo, torch._inductor.compile_fx` took 7.6 s of every baseline
    process's start (0.38 s in torch._inductor.lowering alone), 1.7-2.1 s here with bytecode. The baselines'
    processes, which run no candidate code, write it; the candidate's sandbox reads it, bound read-only (mode 0755:
    the sandbox's user is another), so what a baseline imports is what this user's trusted processes compiled.
    Python checks each file against its source's size and time before using it."""
    import torch

    if Path(importlib.util.cache_from_source(torch.__file__)).exists():
        return None
    path = root() / "bytecode" / sys.implementation.cache_tag
    return path if _private_dir(path, mode=0o755) is None else None


MAX_EXTENSION_BYTES = 1 << 30
"""Most bytes of a solution's native build kept for the next eval of the same sources; a larger build is not kept."""


def extensions_dir(key: str) -> Path | None:
    """Where the native build of the solution whose sources hash to `key` is kept between evals
    (`root()/extensions/<key>`), or None where that directory cannot be trusted.

    Building a CUDA extension takes 20-25 s on an H100 (docs/decisions/2026-12-06-native-build-cache.md), and torch
    builds anew in every fresh build directory, so without this every eval of the same sources would pay it again.
    What is kept is what the candidate's sandbox built (and could have written anything into): it is handed only to
    evals of the very same sources, and every library a candidate loads is judged by what it binds
    (jg_mcp.eval.native.native), wherever it came from."""
    path = root() / "extensions" / key
    return path if _private_dir(path) is None else None


def copy_build(src: Path, dest: Path, owner: int | None = None) -> None:
    """Copy a build directory's regular files and directories (times kept: ninja then sees the build up to date),
    never a link or anything else, and nothing once MAX_EXTENSION_BYTES are copied; `owner` gets what is made."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(src):
        here = Path(dirpath)
        target = dest / here.relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        if owner is not None:
            os.chown(target, owner, owner)
        dirnames[:] = [d for d in dirnames if not (here / d).is_symlink()]
        for name in filenames:
            st = os.lstat(here / name)
            total += st.st_size
            if not stat.S_ISREG(st.st_mode) or total > MAX_EXTENSION_BYTES:
                continue
            shutil.copy2(here / name, target / name, follow_symlinks=False)
            if owner is not None:
                os.chown(target / name, owner, owner)
