"""A seccomp filter for the sandboxes: no new user namespace, no kernel keyrings, no lower core limit.

In a user namespace of its own, an unprivileged process holds every capability over the namespaces it then
creates, so a command could mount a tmpfs of any size (host memory that no process is charged for) past the
sandbox's `--size` caps, or make mounts that hide what bwrap set up. The filter makes `unshare` and `clone`
fail with EPERM when asked for a new user namespace, and `clone3` (whose flags sit in memory a filter cannot
read) fail with ENOSYS, on which glibc and Python fall back to `clone`.

Kernel keyrings are not namespaced (container runtimes refuse them for that reason): a sandboxed process inherits
the server's session keyring (a root login's, which pam_keyinit makes and which holds that login's secrets) and
possesses it, so it could read and write its keys; and the user keyring of its uid outlives every process, so a
key one session stores there is read by the next session handed the same uid (or the next eval's candidate, which
all run as one uid). `add_key`, `request_key` and `keyctl` fail with ENOSYS, as on a kernel built without
keyrings: that is the answer software that uses keyrings optionally (keyutils, Kerberos's KEYRING cache, systemd)
already reads as "none here" and goes on without, where EPERM reads as a refused request that some report as an
error. No toolchain a kernel developer needs uses keyrings.

The core limit: for a `core_pattern` that pipes to a helper (apport, systemd-coredump), the kernel ignores
RLIMIT_CORE but for one value, 1, on which it skips the dump (its mark for a crashing helper); a file dump needs at
least a page. So the sandboxes set the limit to 1, soft and hard, before bwrap starts, and the filter keeps it
there: `setrlimit` and `prlimit64` asked to set RLIMIT_CORE fail with EPERM (reading it stays allowed). A command
that lowers its limit to 0 would otherwise hand its crash to the host's helper, which runs as root outside every
namespace. (A `core_pattern` of Linux 6.17's socket form, `@PATH`, ignores the limit altogether.)

Everything else is allowed. bwrap loads the filter (`--seccomp FD`) after its own setup, so its namespaces are
made first; the live sandbox (`jg_mcp.live.bwrap`) and the eval's candidate sandbox
(`jg_mcp.eval.processes.isolation`) load the same one.

The program is classic BPF over `struct seccomp_data` (nr at offset 0, arch at 4, args[i] at 16 + 8i, low word
first),
for x86-64 and aarch64; on other machines there is no filter (`program()` is None).
"""

from __future__ import annotations

import errno
import os
import platform
import struct
from typing import BinaryIO, NamedTuple

CLONE_NEWUSER = 0x10000000
ALLOW = 0x7FFF0000
KILL_PROCESS = 0x80000000
ERRNO = 0x00050000
LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
JUMP_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JUMP_SET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
JUMP_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
RLIMIT_CORE = 4
X32_BIT = 0x40000000
"""x86-64's x32 calls carry this bit in their number under the same arch: killed, as their numbers differ."""
RETURN = 0x06  # BPF_RET | BPF_K


class SyscallTable(NamedTuple):
    """One machine's AUDIT_ARCH_* and the numbers of the syscalls the filter looks at."""

    arch: int
    unshare: int
    clone: int
    clone3: int
    add_key: int
    request_key: int
    keyctl: int
    setrlimit: int
    prlimit64: int

    @property
    def absent(self) -> tuple[int, ...]:
        """The syscalls answered ENOSYS, as if this kernel had none: clone3 (callers fall back to clone, whose
        flags the filter reads) and the kernel keyrings'."""
        return (self.clone3, self.add_key, self.request_key, self.keyctl)


ARCHES = {
    "x86_64": SyscallTable(
        0xC000003E,
        unshare=272,
        clone=56,
        clone3=435,
        add_key=248,
        request_key=249,
        keyctl=250,
        setrlimit=160,
        prlimit64=302,
    ),
    "aarch64": SyscallTable(
        0xC00000B7,
        unshare=97,
        clone=220,
        clone3=435,
        add_key=217,
        request_key=218,
        keyctl=219,
        setrlimit=164,
        prlimit64=261,
    ),
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
    ops = [
        _op(LOAD_WORD, 4),
        _op(JUMP_EQUAL, table.arch, jt=1),
        _op(RETURN, KILL_PROCESS),
        _op(LOAD_WORD, 0),
        _op(JUMP_AT_LEAST, X32_BIT, jt=0, jf=1),
        _op(RETURN, KILL_PROCESS),
    ]
    for nr in table.absent:
        ops += [_op(JUMP_EQUAL, nr, jt=0, jf=1), _op(RETURN, ERRNO | errno.ENOSYS)]
    ops += _core_limit_kept(table)
    ops += [
        _op(JUMP_EQUAL, table.unshare, jt=1),
        _op(JUMP_EQUAL, table.clone, jt=0, jf=3),
        _op(LOAD_WORD, 16),
        _op(JUMP_SET, CLONE_NEWUSER, jt=0, jf=1),
        _op(RETURN, ERRNO | errno.EPERM),
        _op(RETURN, ALLOW),
    ]
    return b"".join(ops)


def _core_limit_kept(table: SyscallTable) -> list[bytes]:
    """setrlimit(RLIMIT_CORE, ...) and prlimit64(pid, RLIMIT_CORE, new != NULL, ...) fail with EPERM. The resource
    is an unsigned int to the kernel, so only its low word is compared; `new` is a pointer, both words."""
    refuse, allow = _op(RETURN, ERRNO | errno.EPERM), _op(RETURN, ALLOW)
    return [
        _op(JUMP_EQUAL, table.setrlimit, jt=0, jf=4),
        _op(LOAD_WORD, 16),
        _op(JUMP_EQUAL, RLIMIT_CORE, jt=0, jf=1),
        refuse,
        allow,
        _op(JUMP_EQUAL, table.prlimit64, jt=0, jf=8),
        _op(LOAD_WORD, 24),
        _op(JUMP_EQUAL, RLIMIT_CORE, jt=0, jf=5),
        _op(LOAD_WORD, 32),
        _op(JUMP_EQUAL, 0, jt=0, jf=2),
        _op(LOAD_WORD, 36),
        _op(JUMP_EQUAL, 0, jt=1, jf=0),
        refuse,
        allow,
    ]


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
