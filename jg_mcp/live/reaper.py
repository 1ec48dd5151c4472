"""The signal that killed a sandboxed command, told by its parent inside the sandbox.

bwrap exits with 128+N when its command dies of signal N, which reads the same as a command that exits 128+N
itself (bash's `$?` after a killed child). So inside the sandbox the command runs under a reaper: a small Python
process that starts it, waits for it, exits with its status, and when a signal killed it writes the signal's number
to a pipe that only the reaper holds (close-on-exec: the command does not inherit it). The reaper makes itself
non-dumpable (prctl PR_SET_DUMPABLE 0) before it forks, so the command, which runs as the same uid, can neither
ptrace it nor take that descriptor (pidfd_getfd, /proc/PID/fd); the command's exec makes the command dumpable again.
The runner reads the pipe once bwrap has exited (`Status.signal`) and believes it only where bwrap's status agrees.
The reaper resets the signals Python ignores (SIGPIPE, SIGXFSZ) before the command's exec, so the command starts as
it would outside.
"""

from __future__ import annotations

import os
import sys
from typing import BinaryIO

REAPER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n"
    "fd = int(sys.argv[1])\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.close(fd)\n"
    "    for s in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):\n"
    "        signal.signal(s, signal.SIG_DFL)\n"
    "    try:\n"
    "        os.execvp(sys.argv[2], sys.argv[2:])\n"
    "    finally:\n"
    "        os._exit(127)\n"
    "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):\n"
    "    signal.signal(s, signal.SIG_IGN)\n"
    "while True:\n"
    "    try:\n"
    "        _, status = os.waitpid(pid, 0)\n"
    "        break\n"
    "    except InterruptedError:\n"
    "        pass\n"
    "if os.WIFSIGNALED(status):\n"
    "    os.write(fd, b'%d' % os.WTERMSIG(status))\n"
    "    sys.exit(128 + os.WTERMSIG(status))\n"
    "sys.exit(os.WEXITSTATUS(status))\n"
)
"""The reaper's program: `python -I -S -c REAPER FD ARGV...`."""


def reaped(argv: list[str], status_fd: int) -> list[str]:
    """`argv` run under the reaper, which reports a death by signal on the inherited descriptor `status_fd`."""
    return [sys.executable, "-I", "-S", "-c", REAPER, str(status_fd), *argv]


class Status:
    """The pipe a reaper reports on: `write_end` goes to the sandbox (and is closed here once it has started),
    `signal()` reads the report once the sandbox has exited."""

    def __init__(self, read: int, write_end: BinaryIO) -> None:
        self._read = read
        self.write_end = write_end

    @classmethod
    def open(cls) -> Status:
        """A new pipe: its read end does not block, its write end is a file for the sandbox to inherit."""
        read, write = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(read, False)  # the reaper's end blocks: its one short write always lands
        return cls(read, open(write, "wb", buffering=0))

    @property
    def write_fd(self) -> int:
        return self.write_end.fileno()

    def __del__(self) -> None:
        if self._read >= 0:  # a command that never started (killed_by was not asked): the pipe is not leaked
            os.close(self._read)
            self._read = -1

    def signal(self) -> int | None:
        """The signal that killed the command, or None (it exited, or never ran); reads the pipe once and closes
        it."""
        if self._read < 0:
            return None
        try:
            data = os.read(self._read, 16)
        except BlockingIOError:
            data = b""
        finally:
            os.close(self._read)
            self._read = -1
        return int(data) if data.isdigit() else None
