"""A seccomp filter for the sandboxes: no new user namespace.

In a user namespace of its own, an unprivileged process holds every capability over the namespaces it then
creates, so a command could mount a tmpfs of any size (host memory that no process is charged for) past the
sandbox's `--size` caps, or make mounts that hide what bwrap set up. The filter makes `unshare` and `clone`
fail with EPERM when asked for a new user namespace, and `clone3` (whose flags sit in memory a filter cannot
read) fail with ENOSYS, on which glibc and Python fall back to `clone`. Everything else is allowed. bwrap loads
it (`--seccomp FD`) after its own setup, so its namespaces are made first.

The program is classic BPF over `struct seccomp_data` (nr at offset 0, arch at 4, args[0]'s low word at 16),
for x86-64 and aarch64; on other machines there is no filter (`program()` is None).
"""

from __future__ import annotations

import errno
import os
import platform
import struct
from typing import BinaryIO

CLONE_NEWUSER = 0x10000000
ALLOW = 0x7FFF0000
KILL_PROCESS = 0x80000000
ERRNO = 0x00050000
LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
JUMP_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JUMP_SET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
JUMP_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
X32_BIT = 0x40000000
"""x86-64's x32 calls carry this bit in their number under the same arch: killed, as their numbers differ."""
RETURN = 0x06  # BPF_RET | BPF_K
ARCHES = {
    # machine: (AUDIT_ARCH_*, unshare, clone, clone3)
    "x86_64": (0xC000003E, 272, 56, 435),
    "aarch64": (0xC00000B7, 97, 220, 435),
}
"""Syscall numbers from the kernel's tables (asm/unistd_64.h, asm-generic/unistd.h)."""


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter's instructions for `machine` (default: this one), or None where it has no syscall table.
    A process of another architecture (a 32-bit one on x86-64), or an x32 call, is killed: its numbers differ."""
    table = ARCHES.get(machine or platform.machine())
    if table is None:
        return None
    arch, unshare, clone, clone3 = table
    ops = [
        _op(LOAD_WORD, 4),
        _op(JUMP_EQUAL, arch, jt=1),
        _op(RETURN, KILL_PROCESS),
        _op(LOAD_WORD, 0),
        _op(JUMP_AT_LEAST, X32_BIT, jt=0, jf=1),
        _op(RETURN, KILL_PROCESS),
        _op(JUMP_EQUAL, clone3, jt=0, jf=1),
        _op(RETURN, ERRNO | errno.ENOSYS),
        _op(JUMP_EQUAL, unshare, jt=1),
        _op(JUMP_EQUAL, clone, jt=0, jf=3),
        _op(LOAD_WORD, 16),
        _op(JUMP_SET, CLONE_NEWUSER, jt=0, jf=1),
        _op(RETURN, ERRNO | errno.EPERM),
        _op(RETURN, ALLOW),
    ]
    return b"".join(ops)


def program_file() -> BinaryIO | None:
    """A fresh memfd holding `program()`, at offset 0, for one bwrap (`--seccomp FD` reads it to its end), or
    None where there is no filter."""
    code = program()
    if code is None:
        return None
    f = open(os.memfd_create("seccomp", os.MFD_CLOEXEC), "w+b")
    f.write(code)
    f.flush()
    f.seek(0)
    return f
