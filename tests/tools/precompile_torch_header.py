"""Precompile torch/extension.h for this Python's torch, where a compiler given CPATH=<prefix>/torch-pch finds it.

    python tests/tools/precompile_torch_header.py     prints the directory to put in CPATH

GCC, looking for <torch/extension.h> in an include directory, uses `torch/extension.h.gch` there instead when that
file was compiled with the same options that matter (macros the header tests, -O level, -fPIC, the standard), and
reads the header otherwise. A CPU build of a torch extension spends 18 of its 20 core-seconds compiling that header;
with the precompiled one it takes about 8.

The file cannot lie beside torch's own header: every `load_inline` without `use_pch=True` deletes
`torch/include/torch/extension.h.gch`, and in the eval's sandbox, where torch is read-only, that deletion raises and
the candidate's import fails. So it goes in a directory of its own under the virtualenv (bound read-only into the
sandbox with the rest of sys.prefix), with a copy of the header beside it: a second `#include <torch/extension.h>`
in the same file resolves to that directory again. CPATH is searched like -I, before torch's -isystem directories.

Built with the options torch's builder writes into build.ninja for a CPU extension, read from torch itself, so a
new torch's flags are followed. Idempotent: a stamp holds the command and the header's torch version, and nothing
is built while they match. Soft: without torch or a C++ compiler it warns and exits 0, as the tests that build
native code are skipped there anyway.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PCH_DIR = Path(sys.prefix) / "torch-pch"


def warn(message: str) -> int:
    print(f"precompile_torch_header: {message}; torch extensions will compile the header each time", file=sys.stderr)
    return 0


def torch_cflags() -> tuple[str, list[str]]:
    """The compiler and the flags torch's builder uses for a CPU extension, less the per-extension name and the
    source: read from the build.ninja torch writes (no compile)."""
    from torch.utils import cpp_extension as ce

    with tempfile.TemporaryDirectory() as tmp:
        ninja = Path(tmp) / "build.ninja"
        ce._write_ninja_file_to_build_library(
            path=str(ninja),
            name="pch",
            sources=[str(Path(tmp) / "x.cpp")],
            extra_cflags=[],
            extra_cuda_cflags=[],
            extra_sycl_cflags=[],
            extra_ldflags=[],
            extra_include_paths=[],
            with_cuda=False,
            with_sycl=False,
            is_standalone=False,
        )
        lines = dict(line.split(" = ", 1) for line in ninja.read_text().splitlines() if " = " in line)
    flags = [f for f in shlex.split(lines["cflags"]) if not f.startswith("-DTORCH_EXTENSION_NAME=")]
    return lines["cxx"], flags


def main() -> int:
    try:
        import torch
        from torch.utils import cpp_extension as ce

        cxx, flags = torch_cflags()
    except Exception as exc:  # any torch without this builder: no header to precompile
        return warn(f"cannot read torch's build flags ({exc})")
    if shutil.which(cxx) is None:
        return warn(f"no C++ compiler ({cxx})")
    header = Path(ce.include_paths("cpu")[0]) / "torch" / "extension.h"
    out = PCH_DIR / "torch"
    command = [cxx, "-x", "c++-header", *flags, str(header), "-o", str(out / "extension.h.gch")]
    stamp = out / "extension.h.stamp"
    signature = "\n".join([torch.__version__, hashlib.sha256(header.read_bytes()).hexdigest(), shlex.join(command)])
    if stamp.is_file() and stamp.read_text() == signature and (out / "extension.h.gch").is_file():
        print(PCH_DIR)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    shutil.copyfile(header, out / "extension.h")
    partial = out / f"extension.h.gch.{os.getpid()}"  # not a name GCC looks for, until renamed whole
    done = subprocess.run([*command[:-1], str(partial)], capture_output=True, text=True)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        return warn(f"{shlex.join(command)} failed:\n{done.stderr[-2000:]}")
    partial.replace(out / "extension.h.gch")
    stamp.write_text(signature)
    print(PCH_DIR)
    return 0


if __name__ == "__main__":
    sys.exit(main())
