"""A sandboxed command runs only while the process that started it lives.

bwrap's `--die-with-parent` takes hold only after bwrap has started: its outer process sets it after cloning
the sandbox, the sandbox's pid 1 after mounting its root. A server killed (SIGKILL, the OOM killer) inside
that window left an orphaned sandbox that ran its command to the end, unbounded. Two guards close it:

- `outer`: `setpriv --pdeathsig KILL` runs first, so bwrap's outer process dies with the server from before
  its clone (the signal survives the exec of prlimit and bwrap; a setuid bwrap resets it, then sets its own).
  A setpriv older than util-linux 2.33 lacks the option; then bwrap's own setting, made just after its
  clone and well before the sandbox is up, is all there is.
- `inner`: inside the sandbox, after bwrap's setup and before the command, a shell checks this process's
  lifeline: the read end of a pipe whose write end only this process holds (close-on-exec, never written).
  End of file there means the server is gone, and the command does not run (exit 125). Past that check, the
  server was alive after both bwrap processes had bound themselves to it, so its death takes them down.

The eval's candidate sandbox (`jg_mcp.eval.processes.isolation`) and a campaign's agent (`jg_mcp.campaign.supervise`, no
sandbox: the two guards alone) start the same way.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

GONE_EXIT = 125
GUARD = (
    'if ! { true <&"$1"; } 2>/dev/null; then echo "jg-mcp: no lifeline on descriptor $1" >&2; exit '
    f"{GONE_EXIT}; fi; "
    'if read -t 0 -u "$1"; then echo "jg-mcp: the process that started this command is gone" >&2; exit '
    f'{GONE_EXIT}; fi; fd=$1; exec {{fd}}<&-; shift; exec "$@"'
)
"""A descriptor that is not open (a caller that did not pass `read_end()`) stops the command, rather than read as
a live spawner. `read -t 0` succeeds when input is available or at end of file; nothing is ever written, so only
the second: every holder of the write end has exited."""

_pipe: tuple[int, int, int] | None = None


def read_end() -> int:
    """This process's lifeline: a pipe's read end to pass to sandboxes (made once per process; a forked child
    makes its own)."""
    global _pipe
    if _pipe is None or _pipe[2] != os.getpid():
        read, write = os.pipe()  # both close-on-exec: a command is passed only the read end, by pass_fds
        _pipe = (read, write, os.getpid())
    return _pipe[0]


@functools.cache
def has_pdeathsig() -> bool:
    """Whether this host's setpriv can set the parent-death signal."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return False
    done = subprocess.run([setpriv, "--help"], capture_output=True, text=True, timeout=30)
    return "--pdeathsig" in done.stdout


def outer(argv: list[str]) -> list[str]:
    """`argv` (bwrap's command line) started so that it dies with the calling process from its first exec."""
    return ["setpriv", "--pdeathsig", "KILL", "--", *argv] if has_pdeathsig() else argv


def inner(argv: list[str]) -> list[str]:
    """`argv` (the command inside the sandbox) run only if the calling process is still alive once the sandbox
    is up; the caller passes `read_end()` to the process."""
    return ["/bin/bash", "-c", GUARD, "jg-lifeline", str(read_end()), *argv]
